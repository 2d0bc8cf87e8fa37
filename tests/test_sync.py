"""`fsmem sync`: clones of one bare repository converge (byte-identical, nothing lost, no conflict marker,
`fsmem check` clean); without network it fails cleanly and loses nothing; one sync at a time."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import cli_runner
import preloaded
import pytest
import sync_scenario as S

from fsmem import Memory, format as fmt
from fsmem.store.files import file_lock


def git(root: Path, *args: str) -> str:
    return S.git(*args, cwd=root)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Two hosts of one bare remote, made as a user makes them (tests/sync_scenario.py), once per module."""
    return S.make_hosts(tmp_path_factory.mktemp("hosts"), hosts=2, writers=2)


@pytest.fixture
def hosts(built, tmp_path) -> tuple[Path, list[Path]]:
    return S.copy_hosts(*built, tmp_path)


NOW = "2026-12-01T08:00:00+00:00"


def process(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` as a process of its own, as `S.fsmem` runs it, but forked from a parent that imported
    fsmem once (tests/preloaded.py): its exit code, stdout and stderr, without an interpreter start each."""
    proc = preloaded.run(["--root", str(root), *args], env=S.env(), timeout=600)
    if check and proc.returncode:
        raise AssertionError(f"fsmem {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def here(monkeypatch):
    """`fsmem --root ROOT ARGS` through the CLI's entry point and its one error boundary, in this process
    (tests/cli_runner.py), for the tests whose subject is what a sync merges rather than the process; this process's
    writes on the same pinned day."""
    monkeypatch.setenv("FSMEM_NOW", NOW)

    def fsmem(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        code, out, err = cli_runner.fsmem_here(root, *args, now=NOW)
        if check and code:
            raise AssertionError(f"fsmem {' '.join(args)}: exit {code}: {err}")
        return subprocess.CompletedProcess(["fsmem", "--root", str(root), *args], code, out, err)

    return fsmem


@pytest.mark.slow
def test_two_clones_with_four_writers_each_converge_without_losing_anything(tmp_path):
    """Each writer writes a fixed number of times (FSMEM_SYNC_WRITES; a time would make the run's work, and the
    count of writes asserted, depend on the machine's load) while each clone syncs until they are done."""
    writes = int(os.environ.get("FSMEM_SYNC_WRITES", "12"))
    result = S.run(tmp_path, writes=writes, writers=4, hosts=2, every=2.0)
    roots = result["roots"]
    failed = [s for s in result["syncs"] if s["code"] != 0]
    assert not failed, failed
    for host in range(2):  # both clones synced while their writers wrote, not only afterwards
        assert any(s["while_writing"] for s in result["syncs"] if s["host"] == host), result["syncs"]
    # both clones hold byte-identical memories, at origin's commit
    first, second = (S.files_of(root) for root in roots)
    assert first.keys() == second.keys() and first == second
    heads = {git(root, "rev-parse", "HEAD") for root in roots} | {git(result["origin"], "rev-parse", "main")}
    assert len(heads) == 1
    # every note any writer wrote is there; every fact is current or under ## Superseded (of the document, or of
    # its history file once the document shows the newest ten)
    notes = "".join(text.decode() for rel, text in first.items() if rel.startswith("sessions/"))
    written = result["written"]
    assert len(written) > 50
    for item in written:
        if item["kind"] == "observation":
            assert f"Observation {item['mark']} about" in notes, item
        elif item["kind"] == "fact":
            slug = item["person"].lower().replace(" ", "-")
            document = first[f"entities/people/{slug}.md"].decode()
            document += first.get(f"entities/people/{slug}.history.md", b"").decode()
            assert f"- {item['key']}: {item['value']} (" in document, item
            assert f"- {item['key']}: {item['value']}" in notes, item
    # one current value per key, and no conflict marker of any kind
    for rel, data in first.items():
        text = data.decode()
        assert "<<<<<<< " not in text and ">>>>>>> " not in text and fmt.MERGE_MARK not in text, rel
        if rel.startswith(("entities/", "topics/")) and "## Facts" in text:
            facts = text.split("## Facts\n")[1].split("\n## ")[0]
            keys = [line.split(":")[0] for line in facts.splitlines() if line.startswith("- ")]
            assert len(keys) == len(set(keys)), (rel, facts)
    for root in roots:
        assert Memory(root).check().problems == []
        assert git(root, "status", "--porcelain") == ""


def test_without_network_sync_fails_cleanly_and_loses_nothing(hosts):
    _, (first, _) = hosts
    git(first, "remote", "set-url", "origin", str(first.parent / "gone.git"))
    Memory(first, agent="w1").note("- city: Oslo", subject="people/Ann Lee")
    out = process(first, "sync", check=False)
    assert out.returncode == 2 and "cannot fetch from origin" in out.stderr and "nothing is lost" in out.stderr
    assert "Traceback" not in out.stderr
    assert "city: Oslo" in git(first, "show", "HEAD:" + git(first, "log", "-1", "--format=", "--name-only").strip())
    assert git(first, "status", "--porcelain") == ""


def test_one_sync_at_a_time_and_a_clear_message_without_a_remote(hosts, tmp_path):
    _, (first, _) = hosts
    with file_lock(first, "sync"):
        out = process(first, "sync", check=False)
    assert out.returncode == 2 and "another 'fsmem sync' is running" in out.stderr
    lonely = Memory.init(tmp_path / "lonely", git=True)
    out = process(lonely.root, "sync", check=False)
    assert out.returncode == 2 and "no remote named 'origin'" in out.stderr and "git -C" in out.stderr
    plain = Memory.init(tmp_path / "plain")
    out = process(plain.root, "sync", check=False)
    assert out.returncode == 2 and f"turn it on with: fsmem init --git {plain.root}" in out.stderr


def test_a_file_changed_on_one_host_and_removed_on_the_other_stays_and_fsmem_yaml_keeps_this_hosts(hosts, here):
    _, (first, second) = hosts
    Memory(first).write("topics/plan.md", "# Plan\n\n- step: one\n")
    here(first, "sync")
    here(second, "sync")
    Memory(first).edit("topics/plan.md", old="one", new="two")
    Memory(second).rm("topics/plan.md")
    for root, value in ((first, "6000"), (second, "7000")):
        config = root / "fsmem.yaml"
        config.write_text(config.read_text().replace("max_tokens: 2000", f"max_tokens: {value}", 1))
    here(first, "sync")
    held = here(second, "sync", check=False)  # a remote's fsmem.yaml waits for a person (test_sync_trust.py)
    assert held.returncode == 2 and "budgets.default.max_tokens 2000 -> 6000" in held.stderr
    out = here(second, "sync", "--accept-config", "--json")
    assert '"kept_ours": [\n    "fsmem.yaml"\n  ]' in out.stdout
    assert here(first, "sync", check=False).returncode == 2  # now the first host is shown 6000 -> 7000
    here(first, "sync", "--accept-config")
    assert (second / "topics/plan.md").read_text() == (first / "topics/plan.md").read_text()
    assert "- step: two" in (second / "topics/plan.md").read_text()
    assert (
        "max_tokens: 7000" in (second / "fsmem.yaml").read_text()
        and "<<<<<<<" not in (second / "fsmem.yaml").read_text()
    )


def test_a_link_made_and_one_repointed_by_hand_reach_the_other_host_as_links(hosts, here):
    """A link a person makes or re-points was committed by the sync as no file: never shared, or removed from
    every host. Now both arrive as links, with their text, and both work trees are clean."""
    _, (first, second) = hosts
    Memory(first).write("topics/billing.md", "# Billing\n")
    Memory(first).write("topics/other.md", "# Other\n")
    os.symlink("billing.md", first / "topics/alias.md")
    here(first, "sync")
    here(second, "sync")
    assert os.readlink(second / "topics/alias.md") == "billing.md"
    os.unlink(first / "topics/alias.md")
    os.symlink("other.md", first / "topics/alias.md")
    os.symlink("billing.md", first / "topics/pay.md")
    here(first, "sync")
    here(second, "sync")
    for name, text in (("topics/alias.md", "other.md"), ("topics/pay.md", "billing.md")):
        for root in (first, second):
            assert os.readlink(root / name) == text
            assert git(root, "ls-tree", "HEAD", name).split()[:1] == ["120000"]
    assert (second / "topics/alias.md").read_text() == (first / "topics/other.md").read_text()
    assert git(first, "status", "--porcelain") == git(second, "status", "--porcelain") == ""


def test_sync_setup_configures_a_fresh_clone(hosts):
    _, (_, second) = hosts
    driver = subprocess.run(["git", "-C", str(second), "config", "merge.fsmem.driver"], capture_output=True, text=True)
    assert "fsmem.history.merge" in driver.stdout
    assert "*.md merge=fsmem" in (second / ".gitattributes").read_text()
    assert Memory(second).history is not None


def test_prose_both_hosts_changed_is_kept_twice_marked_listed_by_sync_and_reported_by_check(hosts, here):
    _, (first, second) = hosts
    Memory(first).write("topics/plan.md", "# Plan\n\nWe ship in May.\n")
    here(first, "sync")
    here(second, "sync")
    Memory(first).edit("topics/plan.md", old="in May", new="in June")
    Memory(second).edit("topics/plan.md", old="in May", new="in July")
    here(first, "sync")
    out = here(second, "sync")
    assert "topics/plan.md: both hosts changed the same lines; both versions kept" in out.stdout
    here(first, "sync")
    text = (first / "topics/plan.md").read_text()
    assert text == (second / "topics/plan.md").read_text() and "<<<<<<<" not in text
    assert "We ship in July.\n" in text and "We ship in June.\n" in text and fmt.MERGE_MARK in text
    check = here(first, "check", check=False)
    assert check.returncode == 1 and "topics/plan.md:" in check.stdout and "merge: two versions" in check.stdout
    Memory(first).write("topics/plan.md", "# Plan\n\nWe ship in July.\n")  # a human or an agent keeps one
    assert here(first, "check", check=False).returncode == 0


def test_the_merge_driver_under_another_name_of_this_python_is_left_and_another_folders_is_not(hosts):
    """`python3` beside `python` is this Python: the `fsmem` script and `python -m fsmem` may run it by either
    name, and each recorded the driver again over the other's (a line of `sync` output every time they took
    turns). A virtual environment's `python` links to its base interpreter, the same file in another folder:
    that is another environment (no fsmem in it), so a driver naming it is recorded again."""
    _, (_, second) = hosts
    args = "-m fsmem.history.merge %O %A %B %L %P"
    here = Path(sys.executable)
    siblings = [
        name
        for name in (f"python{sys.version_info[0]}", "python", f"python{sys.version_info[0]}.{sys.version_info[1]}")
        if name != here.name and (here.parent / name).exists() and os.path.samefile(here.parent / name, here)
    ]
    if not siblings:
        pytest.skip(f"no other name of this Python in {here.parent}")
    sibling = f"{shlex.quote(str(here.parent / siblings[0]))} {args}"
    git(second, "config", "merge.fsmem.driver", sibling)
    assert "recorded again" not in process(second, "sync").stdout
    assert git(second, "config", "merge.fsmem.driver").strip() == sibling
    base = Path(os.path.realpath(sys.executable))
    if base.parent == here.parent:
        return  # not a virtual environment: no other folder holds this file
    git(second, "config", "merge.fsmem.driver", f"{shlex.quote(str(base))} {args}")
    assert "recorded again" in process(second, "sync").stdout
    assert shlex.split(git(second, "config", "merge.fsmem.driver"))[0] == sys.executable


def test_sync_records_the_merge_driver_again_when_the_environment_moved(hosts):
    """A venv moved or rebuilt leaves .git/config naming a Python that is gone; a plain `git merge` then fails."""
    _, (first, second) = hosts
    moved = "'/gone/venv/bin/python' -m fsmem.history.merge %O %A %B %L %P"
    git(second, "config", "merge.fsmem.driver", moved)
    out = S.fsmem(second, "sync").stdout  # a fresh process: the Python the fsmem script runs under
    assert f"merge driver in .git/config recorded again for this Python (was: {moved})" in out.splitlines()
    python, *rest = shlex.split(git(second, "config", "merge.fsmem.driver"))
    assert rest == ["-m", "fsmem.history.merge", "%O", "%A", "%B", "%L", "%P"]
    # the Python the fsmem script runs under: this venv's, by whichever name pip wrote (python, python3, …)
    assert Path(python).parent == Path(sys.executable).parent and os.path.samefile(python, sys.executable)
    assert "recorded again" not in process(second, "sync").stdout  # said once, when it changed
    # and a plain `git merge` of two edits to one list runs that driver: both facts kept, no conflict
    Memory(first).write("topics/plan.md", "# Plan\n\n- step: one\n")
    process(first, "sync")
    process(second, "sync")
    Memory(first).edit("topics/plan.md", old="- step: one\n", new="- step: one\n- owner: Ann\n")
    process(first, "sync")
    Memory(second).edit("topics/plan.md", old="- step: one\n", new="- step: one\n- due: May\n")
    git(second, "fetch", "-q", "origin")
    done = subprocess.run(
        [
            "git",
            "-C",
            str(second),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "-q",
            "--no-edit",
            "origin/main",
        ],
        capture_output=True,
        text=True,
        env=S.env(),
    )
    assert done.returncode == 0, done.stderr
    merged = (second / "topics/plan.md").read_text()
    assert "- owner: Ann" in merged and "- due: May" in merged and "<<<<<<<" not in merged


def test_a_file_a_person_is_saving_in_place_is_neither_committed_half_nor_merged_over(hosts, here):
    """On the second host a person is saving topics/plan.md in place (truncated, half written, the editor still
    holding it) when `fsmem sync` runs, and the first host changed it: the sync committed the half file as made
    outside fsmem and merged the remote's change over it, so the editor's other half went to a file with no name.
    Now the sync changes nothing and says the file is being saved; once it is, the next sync merges the whole."""
    from test_human_editor import LEASES, SavingInPlace

    if not LEASES:
        pytest.skip("no read leases here")
    _, (first, second) = hosts
    Memory(first).write("topics/plan.md", "# Plan\n\n- step: one\n")
    here(first, "sync")
    here(second, "sync")
    Memory(first).edit("topics/plan.md", old="# Plan\n", new="# Plan, agreed\n")
    here(first, "sync")
    target = second / "topics/plan.md"
    saved = target.read_bytes() + b"- HUMAN: step two, typed on the second host\n"
    saving = SavingInPlace(target, saved)
    refused = here(second, "sync", check=False)
    saving.finish()
    assert target.read_bytes() == saved, target.read_bytes()
    assert refused.returncode == 2 and "topics/plan.md is being saved" in refused.stderr
    here(second, "sync")
    text = target.read_text()
    assert "# Plan, agreed" in text and "- HUMAN: step two, typed on the second host" in text
