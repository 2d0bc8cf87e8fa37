"""What an agent can change by writing: its scope's memory files, nothing else, and nothing for good.

Random sequences of every writing operation (walked from `fsmem.spec.declared`, so a new one is tried too),
through the faces that offer them: the Python API, the MCP tools (the in-process dispatcher) and Claude's
memory tool commands (create, str_replace, insert, delete, rename, folders included). The names are drawn at
the scope's edges: `..`, a link to a file and a link to a folder outside, a look-alike folder
(`topics-look/`), the scope's own root, fsmem.yaml, `.git/`, `.fsmem/`, INDEX.md, a hidden file and a file
that is no memory file inside the scope, case-only and Unicode twins, a rename into its own subfolder.

After every step: a scoped writer changed no byte outside its scope; no agent changed a file that is not a
memory file (fsmem.yaml, `.git/config` and hooks, hidden files, a link's own text) or rewrote history (the
old HEAD is an ancestor of the new one); a read-only agent, and a write that was refused, changed nothing
(not a folder); and every file content a step removed or replaced is in history (nothing is silently lost).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import FsmemError, MemoryToolError
from fsmem.spec import API, declared
from fsmem.store.paths import is_memory_path

REPO = Path(__file__).resolve().parent.parent
NOW = "2026-12-01T12:00:00+00:00"
SCOPE = ["topics", "sessions/2026/12/01"]  # today's session folder: the writer may note
CAFE = "topics/caf\u00e9.md"  # a name in NFC; its NFD and upper-case twins are drawn below
# every kind of name at the scope's edges
NAMES = [
    "topics/billing.md", "topics/deployments.md", CAFE, "topics/new.md", "topics/sub/deep.md", "topics/sub",
    "topics", "topics/", ".", "", "/", "topics/..", "../outside.md", "topics/../profile/team.md", "/etc/passwd",
    "topics/link-out.md", "topics/link-dir", "topics/link-dir/team.md", "topics-look", "topics-look/leak.md",
    "fsmem.yaml", "topics/fsmem.yaml", ".git/config", ".git", ".fsmem", ".fsmem/x.md", "INDEX.md",
    "topics/INDEX.md", "topics/.hidden.md", "topics/notes.txt", "topics\\..\\fsmem.yaml", "topics/Billing.md",
    "topics/cafe\u0301.md", "topics/CAF\u00c9.md", "topics/billing.history.md", "profile/team.md",
    "sessions/2026/12/01/s.md", "sessions", "entities", "entities/orgs", "topics/sub/topics", "topics/sub/a/b",
]  # fmt: skip
BODIES = ["# New\n\n- plan: team\n", "", "---\ntitle: Billing\n---\n# Billing\n", "- x\n" * 3]
WORDS = ["Billing", "plan", "- ", "\n", "x", "# Deep", "coffee"]  # the last two occur once
REVISIONS = ["HEAD", "HEAD~1", "HEAD~2", "2026-11-01"]

# half the time a name the scope holds, so that the writes that succeed move and remove what is there
HELD = ["topics/billing.md", "topics/deployments.md", CAFE, "topics/sub/deep.md", "topics/sub", "topics"]
names = st.one_of(st.sampled_from(HELD), st.sampled_from(NAMES))
bodies = st.sampled_from(BODIES)
words = st.sampled_from(WORDS)


def api_arguments(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for the API operation `name`: its parameters drawn from the edge names, bodies and words."""
    drawn: dict[str, st.SearchStrategy[Any]] = {
        "path": names, "source": names, "target": names, "into": names, "body": bodies,
        "old": words, "new": words, "text": st.just("- plan: noted"), "subject": st.sampled_from(["Billing", "topic/Billing"]),
        "set": st.just({"status": "set"}), "at": st.sampled_from(REVISIONS), "rev": st.sampled_from(REVISIONS),
        "format": st.just("markdown"), "dry_run": st.just(False),
    }  # fmt: skip
    operation = declared()[name]
    wanted = [p.name for p in operation.params if p.on(API) and p.name in drawn and (p.required or p.name != "into")]
    return st.fixed_dictionaries({p: drawn[p] for p in wanted})


WRITES = [name for name, op in declared().items() if not op.read_only and name not in ("distill", "import_from")]
TOOLS = [name for name in WRITES if declared()[name].tool]
tool_paths = st.one_of(
    st.sampled_from(["/memories/" + n for n in HELD + ["profile", "entities/orgs"]]),
    st.sampled_from(["/memories/" + n for n in NAMES] + ["/memories", "/memories/../x.md"]),
)
api_calls = st.one_of(*(st.tuples(st.just("api"), st.just(n), api_arguments(n)) for n in WRITES))
mcp_calls = st.one_of(*(st.tuples(st.just("mcp"), st.just(n), api_arguments(n)) for n in TOOLS))
# Claude's memory tool over the memory (`MemoryTool.over`), and the Anthropic SDK's drop-in where it is installed
tool_faces = st.sampled_from(["tool", "sdk"] if importlib.util.find_spec("anthropic") else ["tool"])
tool_calls = st.one_of(
    st.builds(lambda f, p, t: (f, "create", {"path": p, "file_text": t}), tool_faces, tool_paths, bodies),
    st.builds(lambda f, p, o, n: (f, "str_replace", {"path": p, "old_str": o, "new_str": n}), tool_faces, tool_paths,
              words, words),
    st.builds(lambda f, p, i: (f, "insert", {"path": p, "insert_line": i, "insert_text": "- inserted"}), tool_faces,
              tool_paths, st.integers(0, 3)),
    st.builds(lambda f, p: (f, "delete", {"path": p}), tool_faces, tool_paths),
    st.builds(lambda f, o, n: (f, "rename", {"old_path": o, "new_path": n}), tool_faces, tool_paths, tool_paths),
)  # fmt: skip


def build(root: Path) -> Path:
    """The examples' memory with history, and at the scope's edges: links out, a look-alike folder, a hidden
    file and a file that is no memory file inside it, a Unicode name, INDEX.md; all committed."""
    os.environ["FSMEM_NOW"] = NOW
    try:
        Memory.init(root, git=True)
        shutil.copytree(REPO / "examples" / "memory", root, dirs_exist_ok=True)
        whole = Memory(root)
        whole.write("topics-look/leak.md", "# Leak\n- plan: look-alike\n")
        whole.write(CAFE, "# Caf\u00e9\n- plan: coffee\n")
        whole.write("topics/sub/deep.md", "# Deep\n- plan: deep\n")
        whole.index()
    finally:
        del os.environ["FSMEM_NOW"]
    (root / "topics" / "link-out.md").symlink_to("../profile/team.md")
    (root / "topics" / "link-dir").symlink_to("../profile")
    (root / "topics" / ".hidden.md").write_text("hidden\n")
    (root / "topics" / "notes.txt").write_text("not a memory file\n")
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "edges"], check=True, capture_output=True)
    subprocess.run([*git, "gc", "--quiet", "--prune=now"], check=True, capture_output=True)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file, folder (`name/`) and link (`name@`, its own text, as git keeps it) below `root` but in
    `.git/` and `.fsmem/`, and the parts of `.git/` a write must never change."""
    found = {}
    for current, folders, files in os.walk(root):
        rel = os.path.relpath(current, root)
        if rel == ".":
            folders[:] = [f for f in folders if f not in (".git", ".fsmem")]
        for name in folders + files:
            full = os.path.join(current, name)
            key = os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/")
            if os.path.islink(full):
                found[key + "@"] = os.fsencode(os.readlink(full))  # as git keeps a link
            elif name in folders:
                found[key + "/"] = b""
            else:
                found[key] = Path(full).read_bytes()
    for rel in (".git/config", ".git/info/exclude", ".git/description"):
        if (root / rel).exists():
            found[rel] = (root / rel).read_bytes()
    for hook in sorted((root / ".git" / "hooks").glob("*")):
        found[f".git/hooks/{hook.name}"] = hook.read_bytes()
    return found


def in_scope(path: str, scope: list[str] | None) -> bool:
    """Whether `path` lies in the scope, a folder (`name/`) also when it holds a folder of the scope."""
    if path.endswith("/"):
        return scope is None or any(f"{prefix}/".startswith(path) for prefix in scope) or in_scope(path[:-1], scope)
    return scope is None or any(path == prefix or path.startswith(prefix + "/") for prefix in scope)


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def kept_blobs(root: Path) -> set[str]:
    """Every blob of every commit in history."""
    listed = git(root, "rev-list", "--objects", "--all").stdout.split("\n")
    return {line.split(" ", 1)[0] for line in listed if line}


def sdk_command(name: str, arguments: dict[str, Any]) -> Any:
    """The memory tool command as the Anthropic SDK's tool runner hands it to `FsmemMemoryTool`."""
    from anthropic.types import beta

    kind = "".join(word.title() for word in name.split("_"))
    return getattr(beta, f"BetaMemoryTool20250818{kind}Command")(command=name, **arguments)


def step(memory: Memory, face: str, name: str, arguments: dict[str, Any]) -> bool:
    """Whether the write was made (False: it was refused, with a message)."""
    if face == "mcp":
        return not tools.call(memory, name, arguments).is_error
    try:
        if face == "api":
            getattr(memory, name)(**arguments)
        elif face == "sdk":  # the SDK's drop-in over the memory, made as `FsmemMemoryTool(base_path, agent=...)`
            from fsmem.integrations.anthropic import FsmemMemoryTool, ToolError

            sdk = FsmemMemoryTool(str(memory.root.parent), agent=memory.agent)
            try:
                getattr(sdk, name)(sdk_command(name, arguments))
            except ToolError:
                return False
        else:
            getattr(MemoryTool.over(memory), name)(**arguments)
    except (FsmemError, MemoryToolError):
        return False
    return True


# about 5 s of CPU in make test; `make fuzz` (FSMEM_FUZZ_SCALE) multiplies it, for a longer hunt
EXAMPLES = 20 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("writes") / "mem")


AGENTS = {
    "scoped writer": st.lists(st.one_of(api_calls, mcp_calls), min_size=1, max_size=6),
    "whole writer": st.lists(st.one_of(api_calls, mcp_calls, tool_calls, tool_calls), min_size=1, max_size=6),
    "read-only": st.lists(st.one_of(api_calls, mcp_calls, tool_calls), min_size=1, max_size=6),
    "scoped read-only": st.lists(st.one_of(api_calls, mcp_calls), min_size=1, max_size=6),
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), agent=st.sampled_from(sorted(AGENTS)))
def test_writes_change_only_the_scope_and_lose_nothing(memory_root, tmp_path_factory, data, agent):
    root = tmp_path_factory.mktemp("copy") / "memories"  # where the SDK's drop-in looks, under base_path
    shutil.copytree(memory_root, root, symlinks=True)
    scope = SCOPE if agent.startswith("scoped") else None
    sequence = data.draw(AGENTS[agent], label="sequence")
    before, commit = snapshot(root), git(root, "rev-parse", "HEAD").stdout.strip()
    os.environ["FSMEM_NOW"] = NOW
    try:
        for face, name, arguments in sequence:
            # the read-only agents: fsmem.yaml's `reviewer` (read_only: true), and a scoped one made read-only
            memory = Memory(root, agent="reviewer" if agent == "read-only" else "researcher", scope=scope)
            if agent == "scoped read-only":
                tools.read_only(memory)
            made = step(memory, face, name, arguments)
            after, head = snapshot(root), git(root, "rev-parse", "HEAD").stdout.strip()
            told = (agent, face, name, arguments)
            if "read-only" in agent or not made:  # a refused write changes nothing, not even a folder
                assert after == before and head == commit, told
                continue
            for path in before.keys() | after.keys():
                # a link in the scope may go as itself (rm, mv), as a file may
                if not (in_scope(path.rstrip("@"), scope) and (is_memory_path(path) or path[-1] in "/@")):
                    assert before.get(path) == after.get(path), (path, told)
            assert git(root, "merge-base", "--is-ancestor", commit, head).returncode == 0, told
            lost = {path for path, data in before.items() if after.get(path) != data and not path.endswith("/")}
            if lost:
                kept = kept_blobs(root)
                assert {p for p in lost if blob(before[p]) not in kept} == set(), told
            before, commit = after, head
    finally:
        del os.environ["FSMEM_NOW"]


@pytest.mark.parametrize(
    "face, source, target",
    [
        ("api", "topics/sub", "topics/sub/a/b"),
        ("api", "topics/sub", "topics/sub/inner"),
        ("tool", "/memories/topics/sub", "/memories/topics/sub/a/b"),
        ("tool", "/memories/entities", "/memories/entities/orgs/x"),
    ],
)
def test_a_folder_moved_into_itself_is_refused_with_nothing_made(
    memory_root, tmp_path, monkeypatch, face, source, target
):
    """The finding: `mv topics/sub topics/sub/a/b` (and the memory tool's rename) made topics/sub/a, then failed
    with the system's "invalid argument ('sub')", leaving the new folder behind."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "mem"
    shutil.copytree(memory_root, root, symlinks=True)
    before = snapshot(root)
    memory = Memory(root)
    with pytest.raises((FsmemError, MemoryToolError), match="into itself") as refused:
        if face == "api":
            memory.mv(source, target)
        else:
            MemoryTool.over(memory).rename(source, target)
    assert "invalid argument" not in str(refused.value)
    assert snapshot(root) == before


@pytest.mark.parametrize("face", ["tool", "sdk"])
@pytest.mark.parametrize("link, target", [("topics/link-out.md", "profile/team.md"), ("topics/link-dir", "profile")])
def test_the_memory_tool_deletes_a_link_itself_as_rm_does(memory_root, tmp_path, monkeypatch, face, link, target):
    """The finding: over an fsmem memory, `delete /memories/topics/link-dir` (a link to `../profile`) removed
    the whole profile/ folder and left the link dangling, `delete` of a link to a file removed that file;
    `rm` removes the link itself (docs/safety.md), and so does `clear_all_memory`."""
    if face == "sdk":
        pytest.importorskip("anthropic")
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "memories"
    shutil.copytree(memory_root, root, symlinks=True)
    before = snapshot(root)
    assert step(Memory(root, agent="researcher"), face, "delete", {"path": f"/memories/{link}"})
    after = snapshot(root)
    assert sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)) == [f"{link}@"]
    removed = git(root, "show", "--raw", "--format=%s", "HEAD").stdout
    assert f":120000 000000 {blob(before[link + '@'])[:7]}" in removed and f"\t{link}\n" in removed, removed
    assert (root / target).exists()


@pytest.mark.parametrize("face", ["tool", "sdk"])
@pytest.mark.parametrize(
    "link, moved, text",
    [
        ("topics/link-out.md", "entities/moved.md", b"../profile/team.md"),
        ("topics/link-dir", "entities/moved", b"../profile"),
        ("topics/link-out.md", "moved.md", None),  # from the root, ../profile/team.md would lead out
    ],
)
def test_the_memory_tool_renames_a_link_itself_as_mv_does(memory_root, tmp_path, monkeypatch, face, link, moved, text):
    """The finding: `rename /memories/topics/link-out.md /memories/entities/moved.md` moved profile/team.md, the
    file the link leads to, and left the link dangling; `mv` moves the link itself (docs/safety.md)."""
    if face == "sdk":
        pytest.importorskip("anthropic")
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "memories"
    shutil.copytree(memory_root, root, symlinks=True)
    before = snapshot(root)
    made = step(
        Memory(root, agent="researcher"),
        face,
        "rename",
        {"old_path": f"/memories/{link}", "new_path": f"/memories/{moved}"},
    )
    after = snapshot(root)
    if text is None:
        assert not made and after == before
        return
    assert made
    changed = {p: after.get(p) for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed == {f"{link}@": None, f"{moved}@": text}
    shown = git(root, "show", "--raw", "--no-renames", "--format=%s", "HEAD").stdout
    assert f"\t{link}\n" in shown and f"\t{moved}\n" in shown and ":000000 120000" in shown, shown
