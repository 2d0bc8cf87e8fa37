"""A scoped agent learns nothing of a file outside its scope, whatever it calls, and changes nothing there.

The memory holds, outside the scope `topics/` and `entities/people/`, files whose name, title, body, fields
and tags carry marker words: a document with an alias and an `entity:` field that links into the scope, a
folder whose name only starts like the scope (`topics-sparrow/`), a file deleted since, a file moved out of
the scope and written again, and a session note whose section was consolidated into it. No file in the scope
holds a marker (a file in the scope may name the document's title in a `[[link]]`: that is its own text).
Random sequences of tool calls by a read-only and by a writing agent, through the tool dispatcher and the MCP
server's context resource and distill prompt, must never answer with a marker the agent did not send itself,
and never change a file outside the scope (the read-only agent: no memory file at all, no commit).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, example, given, settings, strategies as st

from fsmem import Memory
from fsmem.agents import mcp_server, tools

REPO = Path(__file__).resolve().parent.parent
NOW = "2026-12-01T12:00:00+00:00"
SCOPE = ["topics", "entities/people"]
WRITER_SCOPE = [*SCOPE, "sessions/2026/12/01"]  # today's session folder: the writer may note
# a scope of two documents: their history files (one holding a key the document no longer shows) lie outside
DOCUMENTS = ["topics/billing.md", "entities/people/adam-smith.md"]
SCOPES = {"folders": SCOPE, "documents": DOCUMENTS}
# words that only files outside the scope hold; a name's marker may come back when the agent sent it
BODY_MARKERS = ("kestrel", "plover", "wrenntag", "heron")
NAME_MARKERS = ("zz9", "sparrow", "gannet", "osprey")
AGENTS = "    peek:\n      max_tokens: 400\n      max_results: 2\n"
VAULT = (
    "---\ntitle: Zqx Vault\naliases: [Qvk Cipher]\ntags: [wrenntag, billing]\nowner: plover\n"
    "entity: orgs/Zqx Vault\n---\n# Zqx Vault\n\n## Facts\n- status: kestrel signed\n"
    "- billing plan: kestrel tier\n- see [[Billing]] and [[Adam Smith]]\n"
)
SESSION = (
    "---\ntitle: Session s-0001\ntype: episodic\nsession: s-0001\ncreated: 2026-11-25T10:00:00+00:00\n---\n"
    "## topic/Billing\n- discount: 5 percent\n\n## orgs/Zqx Vault\n- status: heron closed\n"
    "- Adam Smith said heron about the plan\n"
)


def build(root: Path) -> Path:
    os.environ["FSMEM_NOW"] = NOW
    try:
        Memory.init(root, git=True)
        shutil.copytree(REPO / "examples" / "memory", root, dirs_exist_ok=True)
        config = (root / "fsmem.yaml").read_text()
        (root / "fsmem.yaml").write_text(config.replace("  agents:\n", "  agents:\n" + AGENTS, 1))
        whole = Memory(root)
        whole.write("entities/orgs/vault-zz9.md", VAULT)
        whole.write("topics-sparrow/leak.md", "# Sparrow Leak\n- billing plan: kestrel proration\n")
        whole.write("entities/orgs/gannet-gone.md", "# Gannet Gone\n- billing plan: gannet\n")
        whole.rm("entities/orgs/gannet-gone.md")
        whole.write("topics/moving.md", "# Moving\n- billing plan: moves\n")
        whole.mv("topics/moving.md", "archive/osprey-moved.md")
        whole.write("archive/osprey-moved.md", "# Osprey Moved\n- billing plan: osprey kestrel\n")
        whole.write("topics/hub.md", "# Hub\n\n- see [[Zqx Vault]], [[Qvk Cipher]] and [[Billing]]\n")
        whole.write("sessions/2026/11/25/s-0001.md", SESSION)
        whole.consolidate()
        kept = "entities/people/adam-smith.history.md"
        older = "- vireo: clearance ([2026-01-01](../../entities/people/adam-smith.md) to 2026-06-01)\n"
        whole.write(kept, (root / kept).read_text().rstrip("\n") + "\n" + older)
        whole.index()
        whole.search("warm the index")
    finally:
        del os.environ["FSMEM_NOW"]
    subprocess.run(["git", "-C", str(root), "gc", "--quiet", "--prune=now"], check=True, capture_output=True)
    return root


def memory_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".fsmem", ".git"} & set(p.relative_to(root).parts)
    }


def in_scope(path: str, scope: list[str]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in scope)


def head(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory) -> Path:
    root = build(tmp_path_factory.mktemp("secrets") / "mem")
    files = memory_files(root)
    inside = [text for path, text in files.items() if in_scope(path, WRITER_SCOPE)]
    for marker in BODY_MARKERS + NAME_MARKERS:  # the premise: only files outside hold the markers
        assert not any(marker.encode() in text.lower() for text in inside), marker
        held = any(marker.encode() in (path.encode() + text).lower() for path, text in files.items())
        assert held or marker == "gannet", marker  # gannet-gone.md is in the history only
    return root


PATHS = [
    ".", "topics", "entities", "entities/orgs", "entities/people", "sessions", "archive", "topics-sparrow",
    "topics/billing.md", "topics/hub.md", "topics/moving.md", "topics/new.md", "topics/billing.history.md",
    "entities/people/adam-smith.md", "entities/people/adam-smith.history.md", "entities/orgs/vault-zz9.md",
    "entities/orgs/vault-zz9.history.md", "entities/orgs/gannet-gone.md", "archive/osprey-moved.md",
    "topics-sparrow/leak.md", "INDEX.md", "Zqx Vault", "orgs/Zqx Vault", "vault-zz9", "sessions/2026/12/01/x.md",
]  # fmt: skip
INSIDE = ["topics/billing.md", "topics/hub.md", "entities/people/adam-smith.md", "entities/people/priya-natarajan.md"]
WORDS = ["billing", "plan", "status", "signed", "tier", "closed", "proration", "Vault", "Adam", "see", "owner"]
SUBJECTS = ["topic/Billing", "Billing", "people/Adam Smith", "Adam Smith", "Zqx Vault", "Qvk Cipher", "orgs/Zqx Vault"]
REVISIONS = ["HEAD", "HEAD~1", "HEAD~2", "HEAD~3", "HEAD~6", "2026-11-30", "2026-12-01"]
BODIES = [
    "# New\n\n- see [[Zqx Vault]] and [[Billing]]\n",
    "---\nentity: orgs/Zqx Vault\n---\n# Taken\n- billing plan: mine\n",
    "---\ntitle: Zqx Vault\n---\n# Zqx Vault\n- status: another\n",
    "# Billing\n\n- plan: team\n",
]

few = st.integers(min_value=0, max_value=3)
paths = st.one_of(st.sampled_from(INSIDE), st.sampled_from(PATHS))  # half the time a file the scope holds
tags = st.sampled_from(["billing", "finance", "wrenntag"])
dates = st.sampled_from(["2026-03-01", "2026-10-15", "2026-11-21"])
# the reads whose answers cannot move with what lies outside (search's scores may: docs/server.md)
exact_reads = st.one_of(
    st.builds(lambda p, d: ("ls", {"path": p, "depth": d}), paths, st.integers(1, 6)),
    st.builds(lambda p, t: ("ls", {"path": p, "tag": t}), paths, tags),
    st.builds(
        lambda w, p, c, o: ("grep", {"pattern": w, "paths": [p], "ignore_case": True, "context_lines": c, "offset": o}),
        st.sampled_from(WORDS),
        paths,
        few,
        few,
    ),
    st.builds(lambda w, t: ("grep", {"pattern": w, "tag": t}), st.sampled_from(WORDS), tags),
    st.builds(lambda p: ("read", {"path": p}), paths),
    st.builds(lambda p: ("read", {"path": p, "outline": True, "include_superseded": True}), paths),
    st.builds(lambda p, d: ("read", {"path": p, "as_of": d}), paths, dates),
    st.builds(lambda w, d: ("grep", {"pattern": w, "as_of": d}), st.sampled_from(WORDS), dates),
    st.builds(lambda p: ("stat", {"path": p}), paths),
    st.builds(lambda p, o: ("links", {"path": p, "offset": o}), paths, few),
    st.builds(
        lambda s, k: ("timeline", {"subject": s, **k}),
        st.sampled_from(SUBJECTS),
        st.sampled_from([{}, {"key": "status"}, {"key": "employer"}, {"key": "vireo"}]),
    ),
    st.builds(lambda p: ("log", {"path": p}), paths),
    st.just(("log", {})),
    st.builds(lambda p, r: ("show", {"path": p, "at": r}), paths, st.sampled_from(REVISIONS)),
    st.just(("context", {})),
)
calls = st.one_of(
    exact_reads,
    st.builds(
        lambda ws, o: ("search", {"query": " ".join(ws), "offset": o}), st.lists(st.sampled_from(WORDS), max_size=3), few
    ),
    st.just(("distill", {})),
    st.builds(lambda p, b: ("write", {"path": p, "body": b}), paths, st.sampled_from(BODIES)),
    st.builds(lambda p: ("write", {"path": p, "set": {"entity": "orgs/Zqx Vault"}}), paths),
    st.builds(lambda p, w: ("edit", {"path": p, "old": w, "new": "[[Zqx Vault]]"}), paths,
              st.sampled_from(WORDS)),
    st.builds(lambda s: ("note", {"text": "- status: noted", "subject": s}), st.sampled_from(SUBJECTS)),
)  # fmt: skip


# about 5 s of CPU in make test; `make fuzz` (FSMEM_FUZZ_SCALE) multiplies it, for a longer hunt
EXAMPLES = 25 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


def asked(memory: Memory, name: str, arguments: dict) -> str:
    """What the agent reads back: a tool's answer, or the MCP server's context resource or distill prompt."""
    if name in ("context", "distill"):
        from mcp.shared.exceptions import MCPError

        try:
            if name == "context":
                return mcp_server.read_context(memory, mcp_server.CONTEXT_URI).contents[0].text
            return mcp_server.distill_prompt(memory, mcp_server.DISTILL_PROMPT, {}).messages[0].content.text
        except MCPError as exc:
            return str(exc)
    answer = tools.call(memory, name, arguments)
    return f"{answer.text}\n{answer.structured()}"


def leaked(text: str, arguments: dict) -> list[str]:
    sent = repr(arguments).lower()
    text = text.lower()
    return [m for m in BODY_MARKERS + NAME_MARKERS if m in text and m not in sent]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writer=st.booleans(), reach=st.sampled_from(sorted(SCOPES)), sequence=st.lists(calls, min_size=1, max_size=8))
def test_a_scoped_agent_learns_nothing_outside_and_changes_nothing_there(
    memory_root, tmp_path_factory, writer, reach, sequence
):
    pytest.importorskip("mcp")
    root = tmp_path_factory.mktemp("copy") / "mem"
    shutil.copytree(memory_root, root, symlinks=True)
    scope = SCOPES[reach] + (["sessions/2026/12/01"] if writer else [])  # today's session folder: it may note
    before, commit = memory_files(root), head(root)
    os.environ["FSMEM_NOW"] = NOW
    try:
        memory = Memory(root, agent="peek", scope=scope)
        if not writer:
            tools.read_only(memory)
        for name, arguments in sequence:
            answer = asked(memory, name, arguments)
            assert not leaked(answer, arguments), (name, arguments, answer)
            after = memory_files(root)
            if writer:
                outside = {p for p in before.keys() | after.keys() if not in_scope(p, scope)}
                assert {p: before.get(p) for p in outside} == {p: after.get(p) for p in outside}, (name, arguments)
            else:
                assert after == before and head(root) == commit, (name, arguments)
    finally:
        del os.environ["FSMEM_NOW"]


# -- as if nothing were outside ------------------------------------------------------------


@pytest.fixture(scope="module")
def twins(memory_root, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """For each scope, the memory and a copy without its memory files outside that scope (state and history
    kept, INDEX.md made anew): to an agent of that scope the two must look the same."""
    out = {}
    for name, scope in SCOPES.items():
        bare = tmp_path_factory.mktemp(f"bare-{name}") / "mem"
        shutil.copytree(memory_root, bare, symlinks=True)
        for rel in memory_files(bare):
            if rel.endswith(".md") and rel != "INDEX.md" and not in_scope(rel, scope):
                (bare / rel).unlink()
        os.environ["FSMEM_NOW"] = NOW
        try:
            Memory(bare).index()  # a commit too, which no answer within the scope may show
        finally:
            del os.environ["FSMEM_NOW"]
        out[name] = (memory_root, bare)
    return out


def hashes_hidden(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{12,40}\b", "<hex>", text)  # versions: the hash of a file's content


@settings(max_examples=2 * EXAMPLES, deadline=None)
@given(scope=st.sampled_from(sorted(SCOPES)), sequence=st.lists(exact_reads, min_size=1, max_size=8))
@example(scope="documents", sequence=[("read", {"path": "entities/people/adam-smith.md", "as_of": "2026-03-01"})])
def test_a_scoped_reader_answers_as_if_nothing_were_outside(twins, scope, sequence):
    """Totals, "more" hints, backlinks, resolution and context alike: what lies outside changes no answer.
    (Search is left out: its scores may move with words outside, as docs/server.md says; the markers test
    above holds it to the rest.)"""
    pytest.importorskip("mcp")
    os.environ["FSMEM_NOW"] = NOW
    try:
        memories = [tools.read_only(Memory(root, agent="peek", scope=SCOPES[scope])) for root in twins[scope]]
        for name, arguments in sequence:
            whole, bare = (hashes_hidden(asked(memory, name, arguments)) for memory in memories)
            assert whole == bare, (name, arguments)
    finally:
        del os.environ["FSMEM_NOW"]


@pytest.mark.slow
def test_fsmem_mcp_with_paths_answers_no_marker(memory_root, tmp_path):
    """The stdio face (`fsmem mcp --path topics --path entities/people --read-only`), through the MCP SDK's
    own client: its tools, its context resource and its tool list."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = tmp_path / "mem"
    shutil.copytree(memory_root, root, symlinks=True)
    before, commit = memory_files(root), head(root)
    prefixes = [arg for prefix in SCOPE for arg in ("--path", prefix)]
    argv = ["-m", "fsmem", "--root", str(root), "--agent", "peek", "mcp", "--read-only", *prefixes]
    params = StdioServerParameters(command=sys.executable, args=argv, env={**without_fsmem(), "FSMEM_NOW": NOW})
    asks: list[tuple[str, dict[str, Any]]] = [
        ("ls", {"path": ".", "depth": 9}), ("grep", {"pattern": "plan", "ignore_case": True}),
        ("search", {"query": "billing plan status"}), ("links", {"path": "topics/billing.md"}),
        ("links", {"path": "topics/hub.md"}), ("timeline", {"subject": "Zqx Vault"}),
        ("read", {"path": "entities/orgs/vault-zz9.md"}), ("log", {"path": "topics"}),
        ("show", {"path": "topics/billing.md", "at": "HEAD~1"}), ("stat", {"path": "entities/people/adam-smith.md"}),
        ("write", {"path": "topics/new.md", "body": "# New\n"}),
    ]  # fmt: skip

    async def main() -> list[tuple[dict[str, Any], str]]:
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                listed = await session.list_tools()
                context = await session.read_resource(mcp_server.CONTEXT_URI)
                answers: list[tuple[dict[str, Any], str]] = [({}, listed.model_dump_json())]
                answers.append(({}, getattr(context.contents[0], "text", "")))
                for name, arguments in asks:
                    result = await session.call_tool(name, arguments)
                    answers.append((arguments, "\n".join(getattr(c, "text", "") for c in result.content)))
                return answers

    answers = anyio.run(main)
    assert len(answers) == len(asks) + 2
    for arguments, text in answers:
        assert not leaked(text, arguments), (arguments, text)
    assert memory_files(root) == before and head(root) == commit


def test_a_read_as_of_names_no_history_file_outside_a_one_file_scope(memory_root, tmp_path, monkeypatch):
    """The finding: a scope of one document (`--path entities/people/adam-smith.md`) leaves its history file
    outside, yet `read(as_of=...)` said which keys that file holds and where: "[the value that held on
    2026-03-01 of vireo is kept in entities/people/adam-smith.history.md: read it with as_of]"."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "mem"
    shutil.copytree(memory_root, root, symlinks=True)
    document, kept = "entities/people/adam-smith.md", "entities/people/adam-smith.history.md"
    older = f"- vireo: clearance ([2026-01-01](../../{document}) to 2026-06-01)\n"
    Memory(root).write(kept, (root / kept).read_text().rstrip("\n") + "\n" + older)
    note = f"of vireo is kept in {kept}"
    for scope, told in ((None, True), (["entities/people"], True), ([document], False)):
        memory = tools.read_only(Memory(root, agent="researcher", scope=scope))
        answer = tools.call(memory, "read", {"path": document, "as_of": "2026-03-01"})
        assert not answer.is_error and (note in answer.text) == told, (scope, answer.text)
        assert told or "vireo" not in answer.text and "history" not in answer.text, answer.text
