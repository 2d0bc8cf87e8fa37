"""A team's replicas of one memory (three clones of one bare remote): agents note facts on each, people edit
documents by hand, each host consolidates and syncs when it likes, with its own clock (one behind, one ahead).

A hypothesis state machine. After every full round of syncs (every host, in a drawn order, until all hold the
remote's commit) each replica is checked whole, from the documented promises (docs/history.md,
docs/consolidation.md):

- the replicas hold the same bytes (their memory files, `.git` and `.fsmem` aside);
- every value any note stated, and every observation, is in a document (current, superseded, or in its
  history file) on every replica: nothing is silently lost;
- no conflict marker, git's or fsmem's own, in a memory file;
- consolidating again changes nothing;
- every commit a host or the remote ever had is still an ancestor of its branch: history is never rewritten;
- each document's facts (`## Facts`, `## Superseded`) are those one host consolidating all the notes in one run
  writes, with its fields in the same order: supersession goes by the facts' times, not by which host merged
  (history files aside: docs/history.md says where they are not yet exact).

`make test` runs one example (the fixed round FIRST, then up to two drawn rounds of at most STEPS actions, about
10 s); `make fuzz` (FSMEM_FUZZ_SCALE) multiplies the examples, HYPOTHESIS_PROFILE=explore draws new ones,
FSMEM_FUZZ_SHRINK=1 lets hypothesis shrink a failure (minutes of syncs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import permutations
from pathlib import Path

import pytest
import sync_scenario as S

from fsmem import Memory, format as fmt

STEPS = 12  # actions a round at most
EXAMPLES = int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
SKEW = (timedelta(0), timedelta(hours=-3), timedelta(hours=2))  # host 1's clock behind, host 2's ahead
SUBJECTS = ("people/Nadia Okafor", "people/Omar Haddad", "topic/Billing")
KEYS = ("employer", "city")
ACTIONS = (
    "note_a_fact",
    "note_an_observation",
    "consolidate",
    "sync_one",
    "edit_by_hand",
    "note_a_known_value",
    "note_in_the_same_second",
)
FIRST = [  # (action, host, subject, key, minutes)
    ("note_a_fact", 0, 0, 0, 5),
    ("note_a_fact", 1, 0, 0, 5),
    ("consolidate", 0, 0, 0, 30),
    ("consolidate", 1, 0, 0, 30),
    ("note_a_fact", 2, 0, 0, 5),
    ("edit_by_hand", 0, 0, 0, 5),
    ("note_an_observation", 1, 0, 0, 5),
    ("sync_one", 1, 0, 0, 5),
    ("note_a_fact", 1, 0, 1, 5),
    ("note_in_the_same_second", 0, 0, 1, 5),
    ("note_a_known_value", 0, 1, 1, 5),
    ("note_a_known_value", 2, 1, 1, 5),
    ("consolidate", 0, 0, 0, 5),
    ("consolidate", 2, 0, 0, 5),
    ("consolidate", 1, 0, 0, 5),
]
ORDERS = list(permutations((0, 1, 2)))
OBSERVATIONS = (  # far apart, so that no two are near-duplicates merged into one line
    "Prefers calls before nine in the morning.",
    "Keeps a paper diary of every meeting.",
    "Asked twice about the refund policy for annual plans.",
    "Travels to Lagos each spring for the board.",
    "Dislikes long email threads; wants a summary.",
    "Owns a vintage motorbike restored by hand.",
    "Signed the renewal without legal review.",
    "Her team moved to a four-day week in June.",
)


def git(root: Path, *args: str) -> str:
    return S.git(*args, cwd=root)


def memory_files(root: Path) -> dict[str, bytes]:
    return {rel: data for rel, data in S.files_of(root).items() if rel.endswith(".md")}


def documents(root: Path) -> str:
    """Every entity and topic document and history file, as one text."""
    return "".join(
        data.decode("utf-8") for rel, data in memory_files(root).items() if rel.startswith(("entities/", "topics/"))
    )


def facts_sections(files: dict[str, bytes]) -> dict[str, tuple[list[str], str]]:
    """Each document's `## Facts` and `## Superseded` lines and its front matter's field names, in order."""
    found = {}
    for rel, data in files.items():
        if not rel.startswith(("entities/", "topics/")) or rel.endswith(".history.md"):
            continue
        text = data.decode("utf-8")
        facts = "".join(
            text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0] + "\n"
            for section in ("Facts", "Superseded")
            if f"## {section}\n" in text
        )
        front = text.split("---\n", 2)[1] if text.startswith("---\n") else ""
        fields = ",".join(line.split(":")[0] for line in front.splitlines() if line[:1].isalpha())
        found[rel] = (sorted(line for line in facts.splitlines() if line.strip()), fields)
    return found


@contextlib.contextmanager
def clock(when: datetime) -> Iterator[None]:
    before = os.environ.get("FSMEM_NOW")
    os.environ["FSMEM_NOW"] = when.isoformat().replace("+00:00", "Z")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("FSMEM_NOW", None)
        else:
            os.environ["FSMEM_NOW"] = before


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Three hosts made once (tests/sync_scenario.py); each example takes a copy."""
    return S.make_hosts(tmp_path_factory.mktemp("team"), hosts=3, writers=0)


@pytest.mark.slow
def test_replicas_converge_and_lose_nothing_whoever_writes_consolidates_and_syncs_when(team, tmp_path_factory):
    from hypothesis import HealthCheck, Phase, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

    actions = st.tuples(
        st.integers(0, len(ACTIONS) - 1), st.integers(0, 2), st.integers(0, 2), st.integers(0, 1), st.integers(1, 240)
    )
    scripts = st.lists(actions, min_size=1, max_size=STEPS)

    class Team(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.where = tmp_path_factory.mktemp("replicas")
            self.origin, self.roots = S.copy_hosts(team[0], team[1], self.where)
            self.memories = [Memory(root) for root in self.roots]
            self.now = START
            self.last = START  # when the last fact was noted
            self.said: list[str] = []
            self.seen: list[set[str]] = [set() for _ in self.roots]  # every commit each host had
            self.remote_seen: set[str] = set()

        def at(self, host: int, minutes: int) -> datetime:
            self.now += timedelta(minutes=minutes)
            return self.now + SKEW[host]

        @initialize()
        def first_round(self):
            """Every example starts with FIRST: two hosts each note one subject's key and consolidate it before
            they sync, a third notes it too, a person edits the document."""
            for action, host, subject, key, minutes in FIRST:
                getattr(self, action)(host, self.at(host, minutes), SUBJECTS[subject], KEYS[key])
            self.converge([2, 0, 1], 60)

        @rule(script=scripts, order=st.sampled_from(ORDERS))
        def a_round(self, script, order):
            """Each host acts as drawn (a note, an observation, a consolidation, a sync, a person's edit), then
            every host syncs until all hold the remote's commit, and the replicas are checked."""
            for action, host, subject, key, minutes in script:
                getattr(self, ACTIONS[action])(host, self.at(host, minutes), SUBJECTS[subject], KEYS[key])
            self.converge(list(order), 60)

        def note_a_fact(self, host: int, when: datetime, subject: str, key: str) -> None:
            value = f"v{len(self.said)}h{host}"
            with clock(when):
                self.memories[host].note(f"- {key}: {value}", subject=subject)
            self.last = when
            self.said.append(f"{key}: {value}")

        def note_a_known_value(self, host: int, when: datetime, subject: str, key: str) -> None:
            """A value another host may note too (the same value, noted twice, is one value confirmed)."""
            value = ("Acme", "Globex")[host % 2]  # hosts 0 and 2 note the same value
            with clock(when):
                self.memories[host].note(f"- {key}: {value}", subject=subject)
            self.last = when
            self.said.append(f"{key}: {value}")

        def note_in_the_same_second(self, host: int, when: datetime, subject: str, key: str) -> None:
            """A value noted in the same second as the last note (another host's clock on this one's)."""
            self.note_a_fact(host, self.last, subject, key)

        def note_an_observation(self, host: int, when: datetime, subject: str, key: str) -> None:
            text = next((o for o in OBSERVATIONS if o not in self.said), None)
            if text is not None:
                with clock(when):
                    self.memories[host].note(text, subject=subject)
                self.said.append(text)

        def consolidate(self, host: int, when: datetime, subject: str, key: str) -> None:
            with clock(when):
                self.memories[host].consolidate()

        def sync_one(self, host: int, when: datetime, subject: str, key: str) -> None:
            self.sync(host, when)

        def edit_by_hand(self, host: int, when: datetime, subject: str, key: str) -> None:
            """A person adds a line of prose to a document, or a tag to its front matter, in an editor."""
            docs = sorted(
                rel
                for rel in memory_files(self.roots[host])
                if rel.startswith(("entities/", "topics/")) and not rel.endswith(".history.md")
            )
            if not docs:
                return
            path = self.roots[host] / docs[len(self.said) % len(docs)]
            text = path.read_text()
            mark = f"hand{len(self.said)}h{host}"
            if key == KEYS[0]:
                text = text.replace("\n## ", f"\nWritten by hand: {mark}.\n\n## ", 1)
            elif "\ntags: [" in text:
                text = text.replace("\ntags: [", f"\ntags: [{mark}, ", 1)
            else:
                text = text.replace("\nupdated:", f"\ntags: [{mark}]\nupdated:", 1)
            path.write_text(text)
            self.said.append(mark)

        def sync(self, host: int, when: datetime) -> None:
            root = self.roots[host]
            with clock(when):
                self.memories[host].sync()
            head = git(root, "rev-parse", "HEAD").strip()
            self.seen[host].add(head)
            missing = [c for c in self.seen[host] if git(root, "merge-base", head, c).strip() != c]
            assert not missing, f"host {host}: history rewritten, {missing} no longer ancestors of HEAD"
            main = git(self.origin, "rev-parse", "main").strip()
            gone = [c for c in self.remote_seen if git(self.origin, "merge-base", main, c).strip() != c]
            assert not gone, f"the remote's history was rewritten: {gone}"
            self.remote_seen.add(main)

        def converge(self, order: list[int], minutes: int) -> None:
            when = self.now + timedelta(minutes=minutes)
            self.now = when
            for _ in range(3):
                for host in order:
                    self.sync(host, when + SKEW[host])
                heads = {git(root, "rev-parse", "HEAD").strip() for root in self.roots}
                if heads == {git(self.origin, "rev-parse", "main").strip()}:
                    break
            files = [memory_files(root) for root in self.roots]
            for host in (1, 2):
                differ = sorted(rel for rel in {*files[0], *files[host]} if files[0].get(rel) != files[host].get(rel))
                assert not differ, f"host {host} differs from host 0 after full sync rounds: {differ}"
            for host, root in enumerate(self.roots):
                shown = documents(root)
                lost = [said for said in self.said if said not in shown and not said.startswith("hand")]
                assert not lost, f"host {host}: noted but in no document: {lost}"
                everything = "".join(data.decode("utf-8") for data in files[host].values())
                assert not [said for said in self.said if said.startswith("hand") and said not in everything]
                marked = [
                    rel for rel, data in files[host].items() if b"<<<<<<<" in data or fmt.MERGE_MARK.encode() in data
                ]
                assert not marked, f"host {host}: conflict markers in {marked}"
                with clock(when + SKEW[host]):
                    self.memories[host].consolidate()
                assert memory_files(root) == files[host], f"host {host}: consolidating again changed files"
            self.one_run(files[0], when)

        def one_run(self, files: dict[str, bytes], when: datetime) -> None:
            """The current facts one host writes consolidating every note at once."""
            fresh = self.where / f"one-run-{len(self.said)}"
            shutil.rmtree(fresh, ignore_errors=True)
            Memory.init(fresh)
            for rel, data in files.items():
                if rel.startswith("sessions/"):
                    (fresh / rel).parent.mkdir(parents=True, exist_ok=True)
                    lines = data.decode("utf-8").splitlines(keepends=True)
                    (fresh / rel).write_text("".join(line for line in lines if not line.startswith("consolidated:")))
            with clock(when):
                Memory(fresh).consolidate()
            replica, one = facts_sections(files), facts_sections(memory_files(fresh))
            assert sorted(set(replica) - {S.SHARED}) == sorted(one)  # the hand-written topic aside
            for rel in one:
                assert replica[rel][0] == one[rel][0], f"{rel}: facts differ from one run's"
                hand_free = ",".join(name for name in replica[rel][1].split(",") if name != "tags")
                assert hand_free == one[rel][1], f"{rel}: front matter fields in another order than one run's"

        def teardown(self) -> None:
            shutil.rmtree(self.where, ignore_errors=True)

    Team.TestCase.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=3,  # the first round and at most two drawn ones
        deadline=None,
        database=None,
        phases=[
            Phase.explicit,
            Phase.generate,
            *([Phase.shrink] if os.environ.get("FSMEM_FUZZ_SHRINK") == "1" else []),
        ],
        derandomize=os.environ.get("HYPOTHESIS_PROFILE") != "explore",
        suppress_health_check=list(HealthCheck),
    )
    Team.TestCase().runTest()
