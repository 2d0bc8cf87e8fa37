"""fsmem's git merge driver: a three-way merge of memory files that understands their format.

git runs `python -m fsmem.history.merge %O %A %B %L %P` for each `merge=fsmem`
file (`.gitattributes`) that both sides changed; the result goes into `%A`
and the driver exits 0, so git never writes its own conflict markers into a
memory file, where an agent would read them as memory. What merges how:

- front matter, field by field (`fsmem.history.merge_facts`);
- lines, three-way (`fsmem.history.diff3`): a change on one side is taken;
  additions on both sides at one place are both kept;
- under `## Facts` and `## Superseded`, bullets changed on both sides are
  pooled and each key they touch is re-derived: the value recorded last is
  current, the others go under `## Superseded` with their dates;
- under `## Notes`, observations are the union, and two that are
  near-duplicates (one from each side) become one line with both sources,
  as the consolidator merges them; in a session note, bullets are the union;
- other lines both sides changed: both versions are kept, in a block between
  `<!-- fsmem merge: … -->` comments that `fsmem check` reports until one is chosen;
- a history file (`NAME.history.md`): its values pooled, none current
  (`fsmem.history.merge_history_file`);
- INDEX.md is left as this side has it: `fsmem sync` regenerates it.

The result depends only on the three texts, not on which side is "ours"
(versions are ordered by content), so every host merging the same histories
writes the same bytes.
"""

from __future__ import annotations

import os
import sys
from difflib import SequenceMatcher
from pathlib import Path

from fsmem import format as fmt
from fsmem.config import ConsolidateSettings
from fsmem.format import facts as F
from fsmem.format.history_file import is_history_path
from fsmem.history import merge_facts as MF
from fsmem.history.diff3 import regions
from fsmem.history.merge_history_file import merge_history

GENERATED = ("INDEX.md",)
OPEN = fmt.MERGE_MARK + " both sides changed the lines below; version 1 of 2 -->"
MIDDLE = fmt.MERGE_MARK + " version 2 of 2 -->"
CLOSE = fmt.MERGE_MARK + " end; keep the right version and delete these three comment lines -->"


class _Parts:
    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)
        doc = fmt.split(text)
        self.values = doc.front_matter
        self.front: list[str] | None = None
        self.body = self.lines
        if doc.has_front_matter:
            head = doc.body_start_line - 1
            self.fences = (self.lines[0], self.lines[head - 1])
            self.front = self.lines[1 : head - 1]
            self.body = self.lines[head:]

    def whole(self) -> None:
        """Merge this file as plain lines (one side has no valid front matter)."""
        self.front, self.body = None, self.lines

    @property
    def date(self) -> str:
        return str(self.values.get("updated") or self.values.get("created") or "")[:10]


def merge_text(
    base: str,
    ours: str,
    theirs: str,
    *,
    path: str = "",
    threshold: float = ConsolidateSettings.near_duplicate_threshold,
) -> tuple[str, int]:
    """The merged text, and in how many places both versions were kept (what `fsmem check` reports)."""
    if ours == theirs or theirs == base:
        return ours, 0
    if ours == base:
        return theirs, 0
    if is_history_path(path):
        return merge_history(base, ours, theirs), 0
    b, o, t = _Parts(base), _Parts(ours), _Parts(theirs)
    if o.front is None or t.front is None or (b.front is None and base.strip()):
        for part in (b, o, t):
            part.whole()
    newline = "\r\n" if "\r\n" in ours[:4096] else "\n"
    body, kept = _merge_body(b.body, o.body, t.body, path, threshold, (o.date, t.date), newline)
    if o.front is None or t.front is None:
        return "".join(body), kept
    front = MF.merge_front(b.front or [], o.front, t.front, (b.values, o.values, t.values), newline)
    return "".join([o.fences[0], *front, o.fences[1], *body]), kept


def _ended(lines: tuple[str, ...] | list[str], newline: str) -> list[str]:
    out = list(lines)
    if out and not out[-1].endswith("\n"):
        out[-1] += newline
    return out


def _sections(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The body as (key, lines): the part before the first level-2 heading (key ''), then one part per
    level-2 section, keyed by its lowercased title (a repeated title gets '#2', '#3'…)."""
    parts: list[tuple[str, list[str]]] = [("", [])]
    seen: dict[str, int] = {}
    starts = {start: title for title, start, _ in MF.sections(lines)}
    for index, line in enumerate(lines):
        if index in starts:
            title = starts[index]
            seen[title] = seen.get(title, 0) + 1
            parts.append((title if seen[title] == 1 else f"{title}#{seen[title]}", []))
        parts[-1][1].append(line)
    return parts


def _order(base: list[str], ours: list[str], theirs: list[str], kept: set[str]) -> list[str]:
    """Section order: ours, with theirs' new sections after their predecessor; runs of new sections sorted."""
    order = [key for key in ours if key in kept]
    for number, key in enumerate(theirs):
        if key in order or key not in kept:
            continue
        before = next((k for k in reversed(theirs[:number]) if k in order), None)
        order.insert(order.index(before) + 1 if before is not None else len(order), key)
    fresh = {key for key in order if key not in base}
    out: list[str] = []
    run: list[str] = []
    entries: list[str | None] = [*order, None]
    for entry in entries:
        if entry is not None and entry in fresh:
            run.append(entry)
            continue
        out.extend(sorted(run))
        run = []
        if entry is not None:
            out.append(entry)
    return out


def _common(ours: list[str], theirs: list[str]) -> list[str]:
    """A stand-in base for a section both sides created: the lines they share, in order."""
    blocks = SequenceMatcher(None, ours, theirs, autojunk=False).get_matching_blocks()
    return [line for a, _, size in blocks for line in ours[a : a + size]]


def _merge_body(
    base: list[str], ours: list[str], theirs: list[str], path: str, threshold: float, dates: tuple[str, str], nl: str
) -> tuple[list[str], int]:
    b, o, t = (dict(_sections(part)) for part in (base, ours, theirs))
    kept_keys = set()
    for key in {*o, *t}:
        if key in o and key in t:
            kept_keys.add(key)
        elif key not in b:
            kept_keys.add(key)  # added on one side
        elif (o.get(key) or t.get(key)) != b[key]:
            kept_keys.add(key)  # deleted on one side, changed on the other: the change stays
    out: list[str] = []
    kept = 0
    for key in _order(list(b), list(o), list(t), kept_keys):
        mine, other = o.get(key), t.get(key)
        if mine is None or other is None:
            out.extend(_ended(mine if mine is not None else other or [], nl))
            continue
        old = b.get(key)
        merged, conflicts = _merge_section(old if old is not None else _common(mine, other), mine, other, key, path, nl)
        out.extend(merged)
        kept += conflicts
    out = _settle_facts(out, ours, theirs, path, dates, nl)
    out = _merge_observations(out, set(base), set(ours), set(theirs), threshold, nl, path)
    return out, kept


def _merge_section(
    base: list[str], ours: list[str], theirs: list[str], key: str, path: str, nl: str
) -> tuple[list[str], int]:
    out: list[str] = []
    kept = 0
    session = path.startswith("sessions/") or "/sessions/" in path
    managed = key.split("#")[0] in (MF.FACTS, MF.SUPERSEDED, "notes")
    for region in regions(base, ours, theirs):
        if not region.conflict:
            out.extend(region.lines)
            continue
        listish = all(not line.strip() or F.is_bullet(line) for line in region.base + region.ours + region.theirs)
        if not region.base or (listish and (session or managed)):
            stay = [line for line in region.base if line in region.ours and line in region.theirs and line.strip()]
            first, second = sorted(
                [
                    [x for x in region.ours if x not in region.base and x.strip()],
                    [x for x in region.theirs if x not in region.base and x.strip()],
                ]
            )
            blank = [nl] if any(side and not side[-1].strip() for side in (region.ours, region.theirs)) else []
            out.extend(_ended(stay + first + [x for x in second if x not in first], nl) + blank)
        else:
            one, two = sorted([region.ours, region.theirs])
            out.extend([OPEN + nl, *_ended(one, nl), MIDDLE + nl, *_ended(two, nl), CLOSE + nl])
            kept += 1
    return _ended(out, nl), kept


# -- facts ------------------------------------------------------------------------------------------
def _settle_facts(
    out: list[str], ours: list[str], theirs: list[str], path: str, dates: tuple[str, str], nl: str
) -> list[str]:
    """Re-derive every key whose merged lines neither side had (both sides changed it)."""
    mine, other = MF.fact_lines(ours), MF.fact_lines(theirs)
    for key in sorted(MF.fact_lines(out)):
        merged = [(line, sup) for _, line, sup in MF.fact_lines(out).get(key, [])]
        sides = [[(line, sup) for _, line, sup in found.get(key, [])] for found in (mine, other)]
        if merged in sides:
            continue
        pooled = [(line, dates[0], sup) for line, sup in sides[0]] + [(line, dates[1], sup) for line, sup in sides[1]]
        current, history = MF.rebuild(key, pooled, path)
        out = place_key(out, key, [line + nl for line in current], [line + nl for line in history], nl)
    return out


def _anchor(lines: list[str], section: tuple[str, int, int] | None, key: str, skip: set[int]) -> int | None:
    """Where a line of `key` goes in a section: before the first fact whose key sorts after it."""
    if section is None:
        return None
    _, start, end = section
    last = start + 1
    for index in range(start + 1, end):
        fact = F.parse_fact(lines[index]) if index not in skip else None
        if fact is None:
            continue
        if fact.key > key:
            return index
        last = index + 1
    return last


def place_key(lines: list[str], key: str, current: list[str], history: list[str], nl: str) -> list[str]:
    """Body lines with `key`'s lines replaced: `current` under `## Facts`, `history` under `## Superseded`, where
    the key's lines were, else in key order (sections created when missing). Also used by `undo`."""
    entries = MF.fact_lines(lines).get(key, [])
    drop = {index for index, _, _ in entries}
    found = {title: (title, start, end) for title, start, end in reversed(MF.sections(lines))}
    facts, superseded = found.get(MF.FACTS), found.get(MF.SUPERSEDED)
    at_fact = min((i for i, _, sup in entries if not sup), default=None)
    at_sup = min((i for i, _, sup in entries if sup), default=None)
    if at_fact is None:
        at_fact = _anchor(lines, facts, key, drop)
    if at_sup is None:
        at_sup = _anchor(lines, superseded, key, drop)
    out: list[str] = []
    for index, line in enumerate(lines):
        if index == at_fact:
            out.extend(current)
        if index == at_sup:
            out.extend(history)
        if index not in drop:
            out.append(line)
    if at_fact == len(lines):
        out.extend(current)
    if at_sup == len(lines):
        out.extend(history)
    if current and facts is None:
        out = _new_section(out, "Facts", current, nl)
    if history and superseded is None:
        out = _new_section(out, fmt.SUPERSEDED_HEADING, history, nl)
    return out


def _new_section(lines: list[str], title: str, body: list[str], nl: str) -> list[str]:
    out = _ended(lines, nl)
    if out and out[-1].strip():
        out.append(nl)
    return out + [f"## {title}{nl}", *body]


# -- observations -----------------------------------------------------------------------------------
def _merge_observations(
    out: list[str], base: set[str], ours: set[str], theirs: set[str], threshold: float, nl: str, path: str
) -> list[str]:
    """Two observations under `## Notes`, one new on each side, that are near-duplicates: one line."""
    drop: set[int] = set()
    known = set()
    for line in base:
        obs = F.parse_observation(line) if F.is_bullet(line) else None
        if obs is not None:
            known.add(obs.text)
    for title, start, end in MF.sections(out):
        if title != "notes":
            continue
        cited = {}
        for index in range(start + 1, end):
            obs = F.parse_observation(out[index]) if F.is_bullet(out[index]) else None
            if obs is not None and obs.provenance is not None and out[index] not in base:
                cited[index] = obs
        mine = [i for i in cited if out[i] in ours and out[i] not in theirs]
        other = [i for i in cited if out[i] in theirs and out[i] not in ours]
        if not mine or not other:
            continue
        from rapidfuzz import fuzz

        said = {index: F.observation_words(obs.text) for index, obs in cited.items()}
        for i in mine:
            scored = [
                (fuzz.ratio(F.normalize_text(cited[i].text), F.normalize_text(cited[j].text)), -j, j)
                for j in other
                if said[j] == said[i]
            ]
            if not scored:
                continue
            score, _, j = max(scored)
            if score < threshold:
                continue
            other.remove(j)
            a, b = cited[i], cited[j]
            assert a.provenance is not None and b.provenance is not None
            dates = [_obs_date(a.provenance), _obs_date(b.provenance)]
            # the note of the date the line shows: the first source of the later line (the lower one on a tie,
            # so that the merge is the same from either side)
            firsts = [a.provenance.sources[:1], b.provenance.sources[:1]]
            dated = min(
                (first[0] for first, d in zip(firsts, dates, strict=True) if first and d == max(dates)), default=None
            )
            sources = F.dated_first(set(a.provenance.sources) | set(b.provenance.sources), dated)
            words = [text for text in (a.text, b.text) if text in known] or [min(a.text, b.text)]
            out[min(i, j)] = F.render_observation(min(words), max(dates), sources, path) + nl
            drop.add(max(i, j))
    return [line for index, line in enumerate(out) if index not in drop]


def _obs_date(prov: F.Provenance) -> str:
    return prov.confirmed.date if prov.confirmed else prov.first


# -- the driver ---------------------------------------------------------------------------------------
def _memory_root(path: Path) -> Path | None:
    for folder in (path.parent, *path.parent.parents):
        if (folder / "fsmem.yaml").is_file():
            return folder
    return None


def main(argv: list[str]) -> int:
    """git's call: `%O %A %B %L %P`; the merge is written into %A."""
    base_file, ours_file, theirs_file, _marker, where = argv[:5]
    texts = [Path(name).read_bytes().decode("utf-8", "surrogateescape") for name in (base_file, ours_file, theirs_file)]
    full = Path(os.getcwd(), where)
    root = _memory_root(full)
    rel = full.relative_to(root).as_posix() if root is not None else where
    if rel in GENERATED:
        return 0  # regenerated after the merge, never merged
    threshold = ConsolidateSettings.near_duplicate_threshold
    if root is not None:
        from fsmem.config import Config

        threshold = Config.load(root).consolidate.near_duplicate_threshold
    try:
        merged, _ = merge_text(*texts, path=rel, threshold=threshold)
    except Exception:  # never leave git a half merge: keep both whole versions, marked
        one, two = sorted(texts[1:])
        merged = f"{OPEN}\n{one}{'' if one.endswith(chr(10)) else chr(10)}{MIDDLE}\n{two}{'' if two.endswith(chr(10)) else chr(10)}{CLOSE}\n"
    Path(ours_file).write_bytes(merged.encode("utf-8", "surrogateescape"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
