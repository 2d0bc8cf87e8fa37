"""Import the public LoCoMo data set: each conversation becomes a memory of dated session notes, plus an eval set.

Every session is one note `sessions/YYYY/MM/DD/<sample>-s<N>.md` dated from the
session's timestamp, with one `## people/<Speaker>` subject per speaker and one
bullet per dialog turn, ending in its dialog id (`[D1:3]`); the consolidator then
files the turns into `entities/people/<speaker>.md`. The eval set names
gold evidence by that marker, not by path or line, so it stays valid when a
consolidation step later moves the turns into entity files.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument
from fsmem.store import outside_files

QUESTION_CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) asks about things that were never said
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_WHEN = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)


@dataclass
class ImportResult:
    memories: list[str] = field(default_factory=list)
    evalsets: list[str] = field(default_factory=list)
    sessions: int = 0
    turns: int = 0
    questions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        return (
            f"imported {len(self.memories)} conversations ({self.sessions} sessions, {self.turns} turns) "
            f"and {self.questions} questions; run for example: "
            f"fsmem --root {self.memories[0] if self.memories else 'DIR'} eval {self.evalsets[0] if self.evalsets else 'EVALSET'}"
        )


def parse_when(text: str) -> _dt.datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC: the data set gives no zone)."""
    match = _WHEN.search(text or "")
    if not match:
        raise InvalidArgument(f"cannot read the session time {text!r}")
    hour, minute, half, day, month, year = match.groups()
    hour = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    month_number = _dt.datetime.strptime(month[:3].title(), "%b").month
    return _dt.datetime(int(year), month_number, int(day), hour, int(minute), tzinfo=_dt.UTC)


def sessions_of(conversation: dict[str, Any]) -> list[tuple[int, _dt.datetime, list[dict[str, Any]]]]:
    found = []
    for key in conversation:
        match = re.fullmatch(r"session_(\d+)", key)
        if match and conversation.get(key):
            number = int(match.group(1))
            found.append((number, parse_when(conversation.get(f"session_{number}_date_time", "")), conversation[key]))
    return sorted(found, key=lambda s: s[0])


def turn_line(turn: dict[str, Any]) -> str:
    """One bullet: the turn's words (and the caption of an image it shared), then its dialog id."""
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} (shared an image: {' '.join(str(caption).split())})"
    return f"- {text} [{turn['dia_id']}]"


def session_note(sample_id: str, number: int, when: _dt.datetime, turns: list[dict[str, Any]]) -> str:
    import yaml

    speakers: list[str] = []
    for turn in turns:
        if turn["speaker"] not in speakers:
            speakers.append(turn["speaker"])
    day = f"{when.day} {when:%B %Y}"
    title = f"Session {number}: {' and '.join(speakers)}, {day}"
    front = {
        "title": title,
        "description": f"LoCoMo {sample_id}, session {number}, {when:%H:%M} on {day}",
        "type": "episodic",
        "session": f"{sample_id}-s{number}",
        "created": when.isoformat(),
        "updated": when.isoformat(),
    }
    body = [f"# {title}", ""]
    for speaker in speakers:
        body.append(f"## people/{speaker}")
        body.extend(turn_line(t) for t in turns if t["speaker"] == speaker)
        body.append("")
    head = yaml.safe_dump(front, sort_keys=False, default_flow_style=False, allow_unicode=True, width=10_000)
    return "---\n" + head + "---\n" + "\n".join(body)


def evalset_rows(sample: dict[str, Any], known_ids: set[str]) -> list[dict[str, Any]]:
    rows = []
    for number, qa in enumerate(sample.get("qa") or [], start=1):
        if qa.get("category") not in QUESTION_CATEGORIES:
            continue
        ids = []
        for evidence in qa.get("evidence") or []:
            for session, turn in _DIA_ID.findall(str(evidence)):
                dia_id = f"D{session}:{turn}"
                if dia_id in known_ids and dia_id not in ids:
                    ids.append(dia_id)
        if not ids:
            continue  # no usable evidence: it would wrongly count as "nothing should come back"
        rows.append(
            {
                "id": f"{sample['sample_id']}-q{number}",
                "question": qa["question"],
                "gold": [{"text": f"[{i}]"} for i in ids],
                "category": qa["category"],
                "answer": qa.get("answer"),
            }
        )
    return rows


def import_sample(
    sample: dict[str, Any], target: Path, *, consolidate: bool = True, steps: Iterable[Callable[[Any], Any]] = ()
) -> tuple[Any, Path, int, int, int]:
    """One conversation: a new memory of session notes, consolidated, then `steps`, then its eval set."""
    from fsmem.memory import Memory

    sample_id = str(sample["sample_id"])
    root = target / sample_id
    memory = Memory.init(root)
    config = root / "fsmem.yaml"
    # Benchmarks sweep k up to a few hundred rows; the template's 50-row default would cap them.
    config.write_text(
        config.read_text(encoding="utf-8").replace("    max_results: 50\n", "    max_results: 500\n", 1),
        encoding="utf-8",
    )
    memory = Memory(root)
    known: set[str] = set()
    sessions = turns = 0
    for number, when, session_turns in sessions_of(sample["conversation"]):
        rel = f"sessions/{when:%Y/%m/%d}/{sample_id}-s{number}.md"
        memory.write(rel, session_note(sample_id, number, when, session_turns))
        known.update(t["dia_id"] for t in session_turns)
        sessions += 1
        turns += len(session_turns)
    if consolidate:
        memory.consolidate()  # turns move into entities/people/<speaker>.md; their [D1:3] markers go with them
    for step in steps:
        step(memory)
    questions = evalset_rows(sample, known)
    evalset = target / f"{sample_id}.eval.jsonl"
    evalset.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")
    return memory, evalset, sessions, turns, len(questions)


LOCOMO_LIMIT = 64 * outside_files.MiB  # the public data set is 2.8 MB


def load(file: str | Path) -> list[dict[str, Any]]:
    text = outside_files.read_text(file, what="the LoCoMo file", limit=LOCOMO_LIMIT)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"cannot read LoCoMo file {file}: {exc}") from None
    if not isinstance(data, list) or not all(isinstance(s, dict) and "conversation" in s for s in data):
        raise InvalidArgument(f"{file} is not the LoCoMo data set (a list of samples with 'conversation')")
    return data


def import_locomo(
    file: str | Path,
    target: str | Path,
    *,
    samples: list[str] | None = None,
    consolidate: bool = True,
    steps: Iterable[Callable[[Any], Any]] = (),
) -> ImportResult:
    """Import every conversation (or the `samples` named) into TARGET/<sample_id>, with TARGET/<sample_id>.eval.jsonl."""
    target = outside_files.folder(target, what="the import target")
    data = load(file)
    if samples:
        unknown = set(samples) - {str(s.get("sample_id")) for s in data}
        if unknown:
            raise InvalidArgument(f"no such LoCoMo sample: {', '.join(sorted(unknown))}")
        data = [s for s in data if str(s.get("sample_id")) in samples]
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    result = ImportResult()
    steps = list(steps)
    for sample in data:
        memory, evalset, sessions, turns, questions = import_sample(
            sample, target, consolidate=consolidate, steps=steps
        )
        result.memories.append(str(memory.root))
        result.evalsets.append(str(evalset))
        result.sessions += sessions
        result.turns += turns
        result.questions += questions
    return result
