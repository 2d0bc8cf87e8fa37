"""A memory received from someone else (a tarball, a zip, a copied folder) runs nothing its `.git` names.

The victim is a clone set up by fsmem (tests/hostile_remote.py); the attacker had it before the operator did,
and left in its `.git/config` (and a file it includes) every setting with which git runs a program: fsmonitor,
a hooks folder and hooks in `.git/hooks`, filters, a textconv, a merge driver, a remote's upload-pack and
receive-pack, a credential helper, askpass, and an `ext::` remote allowed by `protocol.ext.allow`; and in
`.gitattributes` and `.git/info/attributes`, the names that make git use them for every file. Each program
leaves a marker. Every fsmem command a person would run on such a memory, a sync with a merge included, runs
as it does anywhere, and no marker appears.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import cli_runner
import pytest
from hostile_remote import World, build_world, git, push
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem.history.git import Git

NOW = "2026-12-01T08:00:00+00:00"
HOOKS = ("pre-commit", "post-commit", "post-index-change", "reference-transaction", "pre-merge-commit")
HOOKS += ("post-merge", "pre-push", "post-checkout", "pre-auto-gc", "commit-msg", "prepare-commit-msg")


def program(folder: Path, name: str, markers: Path) -> str:
    """A script that leaves `markers/name` when run (and passes its input through, as a filter would)."""
    script = folder / f"{name}.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {markers / name}\ncat 2>/dev/null\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def plant(victim: Path, base: Path) -> Path:
    """Every program-naming setting, as an attacker leaves them in the memory before handing it over."""
    markers, programs = base / "markers", base / "programs"
    markers.mkdir()
    programs.mkdir()
    hooks = programs / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {markers / 'hooks'}\nexit 0\n")
        (hooks / name).chmod(0o755)
        (victim / ".git" / "hooks" / name).write_text((hooks / name).read_text())
        (victim / ".git" / "hooks" / name).chmod(0o755)
    run = {name: program(programs, name, markers) for name in ("fsmonitor", "clean", "smudge", "textconv")}
    run |= {name: program(programs, name, markers) for name in ("merge", "uploadpack", "receivepack", "helper")}
    run |= {name: program(programs, name, markers) for name in ("askpass", "included")}
    included = base / "included.cfg"
    included.write_text(f'[filter "inc"]\n\tclean = {run["included"]}\n\tsmudge = {run["included"]}\n')
    with open(victim / ".git" / "config", "a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {run['fsmonitor']}\n\taskPass = {run['askpass']}\n\thooksPath = {hooks}\n"
            f"[include]\n\tpath = {included}\n"
            f'[filter "evil"]\n\tclean = {run["clean"]}\n\tsmudge = {run["smudge"]}\n\trequired = true\n'
            f'[diff "evil"]\n\ttextconv = {run["textconv"]}\n'
            f'[merge "evil"]\n\tdriver = {run["merge"]} %O %A %B\n'
            f'[remote "origin"]\n\tuploadpack = {run["uploadpack"]}; git-upload-pack\n'
            f"\treceivepack = {run['receivepack']}; git-receive-pack\n"
            f'[remote "ext"]\n\turl = ext::sh -c touch% {markers / "ext"}\n'
            f"[protocol]\n\tallow = always\n"
            f"[credential]\n\thelper = {run['helper']}\n"
        )
    attributes = "* filter=evil diff=evil merge=evil\n*.txt filter=inc\n"
    with open(victim / ".git" / "info" / "attributes", "a") as info:
        info.write(attributes)
    (victim / ".gitattributes").write_text(attributes)
    (victim / "attachments").mkdir(exist_ok=True)
    (victim / "attachments" / "a.txt").write_text("an attachment\n")
    return markers


@pytest.fixture
def world(tmp_path) -> World:
    return build_world(tmp_path)


def fsmem(root: Path, *args: str, input: str = "") -> tuple[int, str, str]:
    done = cli_runner.run(["--root", root, *args], env={**os.environ, "FSMEM_NOW": NOW}, text=True, input=input)
    return done.returncode, done.stdout, done.stderr


def test_no_command_on_a_received_memory_runs_a_program_its_git_config_names(world):
    victim = world.victim
    markers = plant(victim, world.base)
    hostile_note = world.hostile / "topics" / "shared.md"
    hostile_note.parent.mkdir(exist_ok=True)
    hostile_note.write_text("# Shared\n\nfrom the other host\n")
    push(world.hostile)
    (victim / "topics").mkdir(exist_ok=True)
    (victim / "topics" / "shared.md").write_text("# Shared\n\nfrom this host, by hand\n")
    runs = [
        ("ls",),
        ("check",),
        ("search", "host"),
        ("note", "the operator opened a received memory"),
        ("write", "topics/new.md"),
        ("edit", "topics/new.md", "--old", "a new file", "--new", "an edited file"),
        ("log",),
        ("log", "topics/new.md"),
        ("diff",),
        ("timeline", "topics/shared.md"),
        ("consolidate",),
        ("revert", "HEAD"),
        ("restore", "topics/new.md", "--at", "HEAD~2"),
        ("sync",),
        ("sync", "ext"),
    ]
    answers = [(args, *fsmem(victim, *args, input="# New\n\na new file\n")) for args in runs]
    Git(victim).run("blame", "--porcelain", "--", "topics/new.md")  # as `timeline` asks of a line edited by hand
    assert sorted(os.listdir(markers)) == [], answers
    assert not [(args, err) for args, code, _, err in answers if "Traceback" in err]
    assert [args for args, code, _, _ in answers if code == 2] == [("sync", "ext")], answers
    assert "transport 'ext' not allowed" in answers[-1][3]
    shared = git(world.origin, "show", "main:topics/shared.md")
    assert "from the other host" in shared


# (section, subsection or None, variable) of every program-naming key disarm.py handles
PROGRAM_KEYS = [
    ("filter", "evil", "clean"),
    ("filter", "evil", "smudge"),
    ("filter", "Lfs", "process"),
    ("diff", "md", "textconv"),
    ("merge", "evil", "driver"),
    ("merge", "fsmem", "driver"),
    ("core", None, "askPass"),
    ("credential", None, "helper"),
    ("credential", "https://example.com", "helper"),
]
SETTING = st.tuples(st.sampled_from(PROGRAM_KEYS), st.sampled_from(["repository", "operator", "included"]))


def config_text(entries: list[tuple[tuple[str, str | None, str], str]]) -> str:
    heads = {(section, sub): f'[{section} "{sub}"]' if sub else f"[{section}]" for (section, sub, _), _ in entries}
    return "".join(f"{heads[section, sub]}\n\t{variable} = {value}\n" for (section, sub, variable), value in entries)


@settings(
    max_examples=15 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(planted=st.lists(SETTING, max_size=8))
def test_after_disarming_git_sees_only_the_operators_programs_or_none(tmp_path_factory, planted):
    """Whatever program-naming keys the repository's config (or a file it includes) and the operator's global
    config set, git with fsmem's arguments resolves each to what the operator's config alone gives it: the
    repository's values never remain (`git config --get-all`, as git reads them)."""
    base = tmp_path_factory.mktemp("disarm")
    repo, included, operator_file = base / "repo", base / "included.cfg", base / "global.cfg"
    git(base, "init", "-q", str(repo))
    theirs, mine, inner = [], [], []
    for n, (key, where) in enumerate(planted):
        {"repository": theirs, "operator": mine, "included": inner}[where].append((key, f"run-{where}-{n}"))
    included.write_text(config_text(inner))
    with open(repo / ".git" / "config", "a") as config:
        config.write(config_text(theirs) + f"[include]\n\tpath = {included}\n")
    operator_file.write_text(config_text(mine))
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(operator_file), "GIT_CONFIG_NOSYSTEM": "1"}
    with_env = dict(os.environ)
    os.environ.update(env)
    try:
        command = Git(repo).command("status")
    finally:
        os.environ.clear()
        os.environ.update(with_env)
    prefix = command[: command.index("status")]

    def read(*args: str) -> list[str]:
        out = subprocess.run([*prefix, "config", *args], capture_output=True, text=True, env=env).stdout
        return out.split("\n")[:-1]

    for section, sub, variable in PROGRAM_KEYS:
        key = ".".join(part for part in (section, sub, variable) if part)
        operators = [value for (k, value) in mine if k == (section, sub, variable)]
        if section == "credential":
            continue
        found = read("--get", key)  # the value git uses: the last one
        if key != "merge.fsmem.driver":
            assert found == operators[-1:] or (not operators and not found[0].startswith("run-")), (key, found)
    helpers = [line.partition(" ")[2] for line in read("--get-regexp", r"^credential\..*helper$")]
    resets = [n for n, value in enumerate(helpers) if value == ""]
    used = helpers[resets[-1] + 1 :] if resets else helpers  # an empty helper empties the list before it
    assert used == [value for (k, value) in mine if k[0] == "credential"], helpers
