"""Whether every sentence of an older README has a home in today's README and docs/: a check for a move of text.

    python docs/check_moved.py REV [--show edited]

The README at REV (a commit, such as the one before the docs became a site)
is cut into units: each sentence of its prose, each row of its tables, each
fenced block, each heading. A unit is *kept* when its words stand in the
README or a page of docs/ as they stood (links and emphasis aside, spacing
ignored), *edited* when most of its word 4-grams do (moved and reworded for
its new place), and *missing* otherwise. Every missing unit is printed with
the heading it stood under, and the check exits 1 when there is one: each
must then be restored, or said to be untrue and fixed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```")
EDITED = 0.5  # share of a unit's word 4-grams that must stand somewhere for it to count as moved and edited


def normal(text: str) -> str:
    """Text without Markdown links' targets, emphasis, backticks and table bars, its spacing made single."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*`|]", " ", text)
    text = text.replace("\\", "")
    return " ".join(text.split())


def units(markdown: str) -> list[tuple[str, str, str]]:
    """(kind, heading, text) for every sentence, table row, fenced block and heading of `markdown`."""
    found: list[tuple[str, str, str]] = []
    heading, paragraph, block, fenced = "", [], [], False

    def flush() -> None:
        text = " ".join(paragraph)
        for sentence in re.split(r"(?<=[.;:!?])\s+(?=[A-Z`*(\[\"'])", text):
            if normal(sentence):
                found.append(("sentence", heading, sentence))
        paragraph.clear()

    for line in markdown.splitlines():
        if FENCE.match(line):
            if fenced:
                found.append(("block", heading, "\n".join(block)))
                block = []
            else:
                flush()
            fenced = not fenced
        elif fenced:
            block.append(line)
        elif line.startswith("#"):
            flush()
            heading = line.lstrip("#").strip()
            found.append(("heading", heading, heading))
        elif line.startswith("|"):
            flush()
            if not re.fullmatch(r"[|\s:-]+", line):
                found.append(("row", heading, line))
        elif not line.strip() or line.startswith("<!--"):
            flush()
        else:
            paragraph.append(line.strip().removeprefix("- ") if line.startswith("- ") else line.strip())
    flush()
    return found


def grams(text: str) -> set[tuple[str, ...]]:
    words = normal(text).lower().split()
    return {tuple(words[i : i + 4]) for i in range(max(1, len(words) - 3))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit whose README.md is checked")
    parser.add_argument("--show", choices=["missing", "edited"], default="missing")
    args = parser.parse_args()
    old = subprocess.run(["git", "-C", str(REPO), "show", f"{args.rev}:README.md"], capture_output=True, text=True)
    if old.returncode:
        print(old.stderr.strip(), file=sys.stderr)
        return 2
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
    corpus = " ".join(normal(page.read_text(encoding="utf-8")) for page in pages)
    corpus_grams = grams(corpus)
    counts = {"kept": 0, "edited": 0, "missing": 0}
    for kind, heading, text in units(old.stdout):
        if normal(text) in corpus:
            verdict = "kept"
        else:
            own = grams(text)
            verdict = "edited" if len(own & corpus_grams) >= EDITED * len(own) else "missing"
        counts[verdict] += 1
        if verdict == args.show or (verdict == "missing" and args.show == "edited"):
            print(f"{verdict}: [{heading}] {kind}: {normal(text)[:300]}")
    print(", ".join(f"{n} {verdict}" for verdict, n in counts.items()), "units")
    return 1 if counts["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
