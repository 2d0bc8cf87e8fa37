"""History through a scope: log, show, diff and restore tell a scoped agent nothing of what lies outside it.

One memory, history on, where an agent scoped to `topics/` shares commits
with files it must not learn of: a write outside, a move from outside into
topics/, a human's commit across both with a message naming a person, a
symbolic link committed by hand, a side branch merged in. Every revision
an attacker might try (HEAD~k, ids of every commit, short ids, dates,
git's message search) gets either a version of a file in scope, described
only by what lies in scope, or one refusal that is the same whatever the
reason; the same memory without a scope still sees everything.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import InvalidArgument, Memory, NotFound
from fsmem.agents import tools

SECRET_WORDS = ("entities", "jane", "layoff", "Doe", "people")
SCOPE = ["topics/"]


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_DATE="2026-11-07T09:00:00+00:00", GIT_COMMITTER_DATE="2026-11-07T09:00:00+00:00")
    identity = ["-c", "user.name=Human", "-c", "user.email=human@example.org"]
    done = subprocess.run(["git", "-C", str(root), *identity, *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def absent(rel: str, at: str) -> str:
    """The refusal as the Python API words it (the CLI says `fsmem log REL`, a tool `log(path="REL")`)."""
    return (
        f"no version of {rel} at {at!r} in the history of this agent's scope; "
        f'memory.log(path="{rel}") lists the commits that changed it'
    )


def clean(text: str) -> None:
    for word in SECRET_WORDS:
        assert word.lower() not in text.lower(), text


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The memory, every commit id oldest first, and the ids of the commits that changed topics/."""
    root = tmp_path_factory.mktemp("scope") / "mem"
    os.environ["FSMEM_NOW"] = "2026-11-01T09:00:00+00:00"
    try:
        Memory.init(root, git=True)
        agent = Memory(root, agent="researcher")
        agent.write("topics/billing.md", "# Billing\n\n- terms: net 30\n")
        os.environ["FSMEM_NOW"] = "2026-11-03T09:00:00+00:00"
        agent.write("entities/people/layoff-list-jane-doe.md", "---\ntitle: Moved\n---\n# Moved\n\n- kept\n")
        os.environ["FSMEM_NOW"] = "2026-11-05T09:00:00+00:00"
        agent.mv("entities/people/layoff-list-jane-doe.md", "topics/moved.md")
        agent.write("entities/people/other.md", "# Other\n")
    finally:
        del os.environ["FSMEM_NOW"]
    # a human commit across both, its message naming the person
    (root / "topics" / "billing.md").write_text("# Billing\n\n- terms: net 45\n")
    (root / "entities" / "people" / "other.md").write_text("# Other\n\n- Jane Doe's manager\n")
    git(root, "add", "-A", "topics", "entities")
    git(root, "commit", "-q", "-m", "net 45 after the layoff of Jane Doe")
    # a link committed by hand, inside topics/, naming a file outside it
    os.symlink("../entities/people/other.md", root / "topics" / "link.md")
    git(root, "add", "topics/link.md")
    git(root, "commit", "-q", "-m", "topics: link")
    os.unlink(root / "topics" / "link.md")  # gone from the files (where a link out is refused), kept in HEAD
    # a side branch merged in: one commit outside, one inside
    git(root, "checkout", "-q", "-b", "side")
    (root / "entities" / "people" / "third.md").write_text("# Third\n")
    git(root, "add", "entities")
    git(root, "commit", "-q", "-m", "entities: third person on the layoff list")
    (root / "topics" / "plans.md").write_text("# Plans\n")
    git(root, "add", "topics/plans.md")
    git(root, "commit", "-q", "-m", "topics: plans")
    git(root, "checkout", "-q", "-")
    git(root, "merge", "-q", "--no-ff", "-m", "merge side (layoffs)", "side")
    everything = git(root, "rev-list", "--reverse", "HEAD").split()
    in_scope = git(root, "rev-list", "HEAD", "--", "topics").split()
    return root, everything, in_scope


@pytest.fixture(scope="module")
def scoped(shared):
    return Memory(shared[0], agent="researcher", scope=SCOPE)


def test_show_at_head_names_only_what_lies_in_scope(scoped, shared):
    _root, _everything, in_scope = shared
    shown = scoped.show("topics/billing.md", at="HEAD")
    clean(shown.to_text())
    assert shown.at["commit"] == in_scope[0][:12]
    assert "- terms: net 45" in shown.to_text()


def test_walking_head_back_never_leaves_the_scopes_history(scoped, shared):
    _root, everything, in_scope = shared
    answered = []
    for k in range(len(everything) + 3):
        at = f"HEAD~{k}"
        try:
            shown = scoped.show("topics/billing.md", at=at)
        except NotFound as exc:
            assert str(exc) == absent("topics/billing.md", at)
            continue
        clean(shown.to_text())
        answered.append(shown.at["commit"])
    # HEAD~k counts the commits that changed topics/ (billing.md was the first of them)
    assert answered == [c[:12] for c in in_scope]
    assert scoped.show("topics/billing.md", at="HEAD~1").at == scoped.show("topics/billing.md", at="HEAD^").at


def test_one_refusal_whatever_is_missing(scoped, shared):
    _root, everything, in_scope = shared
    outside = [c for c in everything if c not in in_scope]
    assert outside
    tried = ["deadbeef", "0" * 40, f"HEAD~{len(everything) + 5}", "2020-01-01"]
    tried += [c for c in outside] + [c[:8] for c in outside] + [c + "~1" for c in outside]
    for at in tried:
        with pytest.raises(NotFound) as caught:
            scoped.show("topics/billing.md", at=at)
        assert str(caught.value) == absent("topics/billing.md", at), at
        with pytest.raises(NotFound) as caught:
            scoped.diff(at, "topics")
        assert str(caught.value) == absent("topics", at), at
    # a file in scope at a commit of the scope from before it existed: the same refusal
    first = in_scope[-1]
    with pytest.raises(NotFound) as caught:
        scoped.show("topics/moved.md", at=first)
    assert str(caught.value) == absent("topics/moved.md", first)
    # a link committed by hand is no version either (its text names a file outside)
    with pytest.raises(NotFound) as caught:
        scoped.show("topics/link.md", at="HEAD")
    assert str(caught.value) == absent("topics/link.md", "HEAD")


def test_revisions_that_search_or_name_refs_are_refused_by_their_form(scoped):
    for at in (":/layoff", "HEAD^{/layoff}", "side", "HEAD@{1}", "HEAD^2", "main~1", "HEAD:entities"):
        with pytest.raises(InvalidArgument) as caught:
            scoped.show("topics/billing.md", at=at)
        assert "is not a revision this agent may name" in str(caught.value)


def test_log_withholds_messages_of_commits_that_reached_outside(scoped, shared):
    _root, _everything, in_scope = shared
    log = scoped.log("topics")
    assert log.total == len(in_scope) and [e.commit for e in log.entries] == [c[:12] for c in in_scope]
    text = log.to_text()
    clean(text)
    messages = [e.message for e in log.entries]
    assert "topics: plans" in messages and "topics: link" in messages
    assert "write topics/billing.md (new file)" in messages
    withheld = [m for m in messages if "message withheld" in m]
    assert withheld == [
        "changed topics/billing.md (message withheld: the commit also changed files outside this agent's scope)",
        "changed topics/moved.md (message withheld: the commit also changed files outside this agent's scope)",
    ]
    for entry in log.entries:
        assert all(p.startswith("topics/") for p in entry.paths)
    assert scoped.log("topics/moved.md").total == 1


def test_diff_shows_only_files_in_scope_and_no_link(scoped, shared):
    _root, _everything, in_scope = shared
    old = in_scope[-1]
    shown = scoped.diff(f"{old[:12]}..HEAD", "topics")
    text = shown.to_text()
    clean(text)
    assert "+- terms: net 45" in text and "topics/plans.md" in text and "topics/link.md" not in text
    assert shown.label == f"{old[:12]}..{in_scope[0][:12]}, topics"


def test_restore_from_outside_the_scopes_history_is_the_same_refusal(scoped, shared):
    root, everything, in_scope = shared
    before = (root / "topics" / "billing.md").read_bytes()
    for at in [c for c in everything if c not in in_scope][:3] + ["deadbeef"]:
        with pytest.raises(NotFound) as caught:
            scoped.restore("topics/billing.md", at=at)
        assert str(caught.value) == absent("topics/billing.md", at).replace(
            "; memory.log", "; nothing was changed (memory.rm() removes it); memory.log"
        )
    assert (root / "topics" / "billing.md").read_bytes() == before


def test_the_tools_of_a_scoped_agent_say_the_same(scoped, shared):
    _root, everything, _in_scope = shared
    for k in range(len(everything)):
        answer = tools.call(scoped, "show", {"path": "topics/billing.md", "at": f"HEAD~{k}"})
        clean(answer.text)
    clean(tools.call(scoped, "log", {"path": "topics"}).text)


def test_without_a_scope_everything_is_seen(shared):
    root, everything, _in_scope = shared
    whole = Memory(root)
    messages = [e.message for e in whole.log().entries]
    assert "net 45 after the layoff of Jane Doe" in messages
    assert "mv entities/people/layoff-list-jane-doe.md -> topics/moved.md" in messages
    shown = whole.show("topics/billing.md", at="HEAD~1")
    assert shown.at["commit"] == git(root, "rev-parse", "HEAD~1")[:12]
    assert whole.show("topics/link.md", at="HEAD").read.lines == [(1, "../entities/people/other.md")]
    assert "topics/link.md" in whole.diff("HEAD~3..HEAD", "topics").to_text()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.one_of(st.just("HEAD"), st.from_regex(r"[0-9a-f]{4,12}", fullmatch=True), st.integers(0, 20)),
    steps=st.lists(st.sampled_from(["~", "^", "~2", "^1", "~0"]), max_size=4),
    short=st.integers(4, 40),
)
def test_any_revision_is_a_version_in_scope_or_the_one_refusal(scoped, shared, base, steps, short):
    _root, everything, in_scope = shared
    head = base if isinstance(base, str) else everything[base % len(everything)][:short]
    at = head + "".join(steps)
    try:
        shown = scoped.show("topics/billing.md", at=at)
    except NotFound as exc:
        assert str(exc) == absent("topics/billing.md", at)
        return
    clean(shown.to_text())
    assert shown.at["commit"] in [c[:12] for c in in_scope]


@pytest.mark.slow
def test_fsmem_mcp_with_a_path_says_the_same(shared):
    """The stdio face (`fsmem mcp --path topics/`), through the MCP SDK's own client."""
    pytest.importorskip("mcp")
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root, everything, _in_scope = shared
    env = without_fsmem()
    argv = ["-m", "fsmem", "--root", str(root), "--agent", "researcher", "mcp", "--path", "topics/"]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                calls = [("show", {"path": "topics/billing.md", "at": f"HEAD~{k}"}) for k in range(len(everything))]
                calls.append(("log", {"path": "topics"}))
                return [await session.call_tool(name, arguments) for name, arguments in calls]

    results = anyio.run(main)
    for result in results:
        clean(result.content[0].text)
    assert "message withheld" in results[-1].content[0].text
