"""The memory's state checked whole at the sync boundary (issue 31): what the merged tree may hold, whatever the
incoming diff says.

Each test is an attack as issue 31 found it: a bare remote, the victim (a clone set up by fsmem) and a hostile
second clone that pushes with plain git (and git plumbing, for trees git's porcelain would not make). After every
sync the victim's tree holds only links that lead, inside the memory, to memory files; no name git would refuse to
check out; no name a Windows or macOS copy cannot hold; and every file is visible to `ls` or reported by `check`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
import sync_scenario as S
from hostile_remote import World, build_world, copy_world, git, push, push_entries, tree_names
from test_sync_trust import fsmem, refused, sync

from fsmem import Memory


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> World:
    """The world every attack starts from, built once (tests/hostile_remote.py); each test gets a copy."""
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.fixture
def world(template, tmp_path) -> World:
    return copy_world(template, tmp_path)


def repaired(world: World) -> None:
    """`sync --repair` gets past the refusal, and the next sync and check are clean of it."""
    done = sync(world.victim, "--repair")
    assert done.returncode == 0, done.stderr
    assert "repaired origin/main" in done.stdout
    again = sync(world.victim)
    assert again.returncode == 0, again.stderr
    assert "the last fsmem sync refused" not in fsmem(world.victim, "check", check=False).stdout


# -- finding 1: a link judged again on the merged tree ---------------------------------------------------------
def test_a_link_that_a_later_push_turns_outward_is_refused_on_the_merged_tree(world):
    (world.hostile / "topics/a").mkdir()
    (world.hostile / "topics/a/keep.md").write_text("# Keep\n")
    (world.hostile / "topics/c/d").mkdir(parents=True)
    (world.hostile / "topics/c/d/keep.md").write_text("# Keep\n")
    os.symlink("../c/d", world.hostile / "topics/a/b")  # a folder of memory, two deep
    os.symlink("a/b/../../../outside/secret.txt", world.hostile / "topics/escape.md")  # inside, and nothing there
    push(world.hostile)
    assert sync(world.victim).returncode == 0
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    (world.hostile / "topics/a/b").unlink()
    os.symlink(".", world.hostile / "topics/a/b")  # in-memory, alone harmless: topics/escape.md now leads out
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "topics/escape.md")
    assert "leads outside the memory" in out.stderr
    assert os.readlink(world.victim / "topics/a/b") == "../c/d"
    repaired(world)
    assert not os.path.lexists(world.victim / "topics/escape.md")
    assert "topics/escape.md" not in tree_names(world.origin)
    for path in Path(world.victim).rglob("*"):  # nothing on the victim leads out of its memory
        if path.is_symlink() and ".git" not in path.parts:
            assert os.path.realpath(path).startswith(os.path.realpath(world.victim) + os.sep), path


def test_a_link_that_climbs_out_of_a_folder_that_is_not_there_is_refused(world):
    os.symlink("a/b/../../../outside/secret.txt", world.hostile / "topics/escape.md")
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "topics/escape.md")
    assert "climbs out of topics/a/b, which is not a folder of the memory" in out.stderr


# -- finding 2 (the boundary's side): generated and control files as links ----------------------------------------
@pytest.mark.parametrize("name", ["INDEX.md", "topics/shared.history.md", ".gitignore"])
def test_a_generated_or_control_file_pushed_as_a_link_is_refused(world, name):
    (world.hostile / name).unlink(missing_ok=True)
    os.symlink(os.path.relpath(world.hostile / S.SHARED, (world.hostile / name).parent), world.hostile / name)
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, name)
    assert "as a symbolic link" in out.stderr
    assert (world.victim / S.SHARED).read_text() == S.SHARED_TEXT
    repaired(world)
    assert not (world.victim / name).is_symlink()
    assert (world.victim / S.SHARED).read_text() == S.SHARED_TEXT
    assert git(world.origin, "show", f"main:{S.SHARED}") == S.SHARED_TEXT


def test_a_link_to_a_generated_file_is_refused(world):
    os.symlink("../INDEX.md", world.hostile / "topics/index.md")
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "topics/index.md")
    assert "which fsmem generates" in out.stderr


# -- finding 3: names git refuses to check out ----------------------------------------------------------------
@pytest.mark.parametrize(
    "name, folder",
    [
        ("GIT~1", "topics"),
        ("git~1", "topics"),
        (".git::$INDEX_ALLOCATION", "topics"),
        (".git. ", "topics"),
        (".g\u200cit", "topics"),  # HFS+ ignores the zero-width non-joiner: .git
        ("\ufeff.git", ""),
    ],
)
def test_a_name_git_refuses_to_check_out_is_refused_and_the_repair_gets_past_it(world, name, folder):
    commit = push_entries(world.hostile, {name: ("100644", b"[core]\n\tfsmonitor = evil\n")}, folder)
    out = sync(world.victim)
    shown = f"{folder}/{name}" if folder else name
    refused(out, commit, shown)
    assert "git refuses" in out.stderr
    check = fsmem(world.victim, "check", check=False)
    assert check.returncode == 1 and "the last fsmem sync refused it" in check.stdout
    repaired(world)
    assert shown not in tree_names(world.origin)
    fresh = world.base / "fresh"
    cloned = subprocess.run(
        [
            "git",
            "-c",
            "core.protectNTFS=true",
            "-c",
            "core.protectHFS=true",
            "clone",
            "-q",
            str(world.origin),
            str(fresh),
        ],
        capture_output=True,
        text=True,
    )
    assert cloned.returncode == 0, cloned.stderr


def test_git_refuses_exactly_what_git_itself_refuses_to_check_out(tmp_path):
    from fsmem.history.incoming import git_refuses

    names = [
        "GIT~1", "git~1", "Git~1 ", "git~2", "git~10", ".git::$INDEX_ALLOCATION", ".git:x", ".git.", ".git ", ".GIT",
        ".gIt", ".git\u200c", ".g\u200dit", "\u206a.git", ".git\ufeff", ".gitx", "git~1x", "gitx~1", ".git~1",
        "a.git", "x\\.git", "x\\git~1", "notes.md", "café.md", ".obsidian", "..git", "git",
    ]  # fmt: skip
    git(tmp_path, "init", "-q")
    blob = git(tmp_path, "hash-object", "-w", "--stdin", input="x\n").strip()
    links = [".gitmodules", ".GITMODULES. ", "gitmod~1", "gi7eba~9", "gi7eb~12", ".gitmodulesx", "gitmod~5", "modules"]
    for name, mode in [*((name, "100644") for name in names), *((name, "120000") for name in links)]:
        tree = git(tmp_path, "mktree", input=f"{mode} blob {blob}\t{name}\n").strip()
        index = tmp_path / "index"
        index.unlink(missing_ok=True)
        git_says = subprocess.run(
            ["git", "-c", "core.protectNTFS=true", "-c", "core.protectHFS=true", "read-tree", tree],
            cwd=tmp_path,
            capture_output=True,
            env={**S.env(), "GIT_INDEX_FILE": str(index)},
        )
        assert git_refuses(name, mode) == bool(git_says.returncode), (name, mode, git_says.stderr)


# -- finding 5: one portable-name rule, for local writes and remote trees --------------------------------------
NFC, NFD = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")


@pytest.mark.parametrize(
    "entries, shown, says",
    [
        ({NFD: b"# Cafe\n"}, f"topics/{NFD}", "differs only by Unicode normalisation"),
        ({"COM\u00b2.md": b"# Com\n"}, "topics/COM\u00b2.md", "a device name Windows reserves"),
        ({"LPT\u00b9.md": b"# Lpt\n"}, "topics/LPT\u00b9.md", "a device name Windows reserves"),
        ({"CONIN$.md": b"# Conin\n"}, "topics/CONIN$.md", "a device name Windows reserves"),
        ({"conout$": b"# Conout\n"}, "topics/conout$", "a device name Windows reserves"),
        ({"x\\y.md": b"# X y\n"}, "topics/x\\y.md", "which Windows cannot hold"),
        ({"trailing.md.": b"# T\n"}, "topics/trailing.md.", "ends in a dot or a space"),
        ({"Shared.md": b"# Shared twin\n"}, "topics/Shared.md", "differs only by letter case"),
    ],
)
def test_a_name_a_windows_or_macos_copy_cannot_hold_is_refused_from_a_remote(world, entries, shown, says):
    (world.victim / "topics" / NFC).write_text("# Café\n")
    assert sync(world.victim).returncode == 0
    commit = push_entries(world.hostile, {name: ("100644", data) for name, data in entries.items()}, "topics")
    out = sync(world.victim)
    refused(out, commit, shown)
    assert says in out.stderr
    repaired(world)
    again = sync(world.victim)  # and every later sync goes through
    assert again.returncode == 0, again.stderr
    assert (world.victim / "topics" / NFC).read_text() == "# Café\n"


def test_a_backslash_name_already_on_this_host_never_stops_sync_and_check_reports_it(world):
    (world.victim / "topics" / "x\\y.md").write_text("# X y\n")
    done = sync(world.victim)
    assert done.returncode == 0, done.stderr
    assert sync(world.victim).returncode == 0
    check = fsmem(world.victim, "check", check=False).stdout
    assert "topics/x\\y.md:1: skipped: the name holds '\\'" in check and "rename it outside fsmem" in check


@pytest.mark.parametrize(
    "path, says",
    [
        ("topics/COM\u00b2.md", "is named COM\u00b2, a device name"),
        ("topics/lpt\u00b3.md", "is named LPT\u00b3, a device name"),
        ("topics/CONIN$.md", "is named CONIN$, a device name"),
        ("topics/conout$.notes.md", "is named CONOUT$, a device name"),
        (f"topics/{NFD}", "differs only by Unicode normalisation from topics/café.md"),
    ],
)
def test_memory_refuses_the_new_unportable_names_locally(tmp_path, path, says):
    from fsmem.errors import InvalidArgument

    memory = Memory.init(tmp_path / "m")
    memory.write(f"topics/{NFC}", "# Café\n")
    with pytest.raises(InvalidArgument) as refused_:
        memory.write(path, "# New\n")
    assert says in str(refused_.value)


def test_check_reports_unicode_twins_already_stored_with_a_rename(tmp_path):
    from fsmem.store.names import unportable

    found = dict(unportable([f"topics/{NFC}", f"topics/{NFD}", "topics/CONIN$.md"]))
    assert "differs only by Unicode normalisation" in found[f"topics/{NFD}"]
    assert "rename it with: fsmem mv" in found[f"topics/{NFD}"]
    assert found["topics/CONIN$.md"].endswith("rename it with: fsmem mv 'topics/CONIN$.md' 'topics/CONIN$_.md'")


# -- finding 4: a document turned into a folder while this host edits it ----------------------------------------
def test_a_document_the_remote_turns_into_a_folder_while_this_host_edits_it_stays_a_visible_memory_file(world):
    (world.hostile / S.SHARED).unlink()
    (world.hostile / S.SHARED).mkdir()
    (world.hostile / S.SHARED / "part.md").write_text("# Part\n")
    push(world.hostile)
    memory = Memory(world.victim, agent="w1")
    memory.edit(S.SHARED, old="- owner: nobody", new="- owner: the victim")
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    kept = [p for p in (world.victim / "topics").iterdir() if p.name.startswith("shared (edited on ")]
    assert len(kept) == 1 and kept[0].name.endswith(").md"), sorted(p.name for p in (world.victim / "topics").iterdir())
    rel = f"topics/{kept[0].name}"
    assert "- owner: the victim" in kept[0].read_text()
    assert rel in out.stdout
    assert not any("~" in name for name in tree_names(world.origin))
    assert rel in tree_names(world.origin)
    assert any(entry.path == rel for entry in Memory(world.victim).ls("topics").entries)
    check = fsmem(world.victim, "check", check=False).stdout
    assert f"{rel}:1: " in check and "turned topics/shared.md into a folder" in check


# -- finding 11 (its part): this host's id is this host's --------------------------------------------------------
def test_a_remote_cannot_set_this_hosts_id_whatever_the_policy(world):
    git(world.victim, "config", "fsmem.acceptConfig", "settings")
    config = world.hostile / "fsmem.yaml"
    config.write_text(config.read_text().replace("  host_id: null", "  host_id: everyone", 1))
    push(world.hostile)
    taken = sync(world.victim)
    assert taken.returncode == 0 and "notes.host_id" in taken.stdout, taken.stderr  # the standing policy took it
    assert "host_id: everyone" in (world.victim / "fsmem.yaml").read_text()
    Memory(world.victim).note("- city: Oslo", subject="people/Ann Lee")
    notes = [p.name for p in (world.victim / "sessions").rglob("*.md")]
    assert notes and not any("everyone" in name for name in notes), notes
    check = fsmem(world.victim, "check", check=False).stdout
    assert "fsmem.yaml:1: notes.host_id in fsmem.yaml is not read" in check


def test_this_hosts_id_is_set_in_its_own_git_config(world):
    git(world.victim, "config", "fsmem.hostId", "laptop")
    Memory(world.victim).note("- city: Oslo", subject="people/Ann Lee")
    assert any(p.name == "default-laptop.md" for p in (world.victim / "sessions").rglob("*.md"))


# -- what the sync fuzzer found (/work/wt/FUZZ-FINDINGS.md, F1-F7) -------------------------------------------------
def test_a_generated_file_pushed_as_a_folder_is_refused_and_the_repair_gets_past_it(world):
    """F1: INDEX.md as a folder made every sync exit 2 ('is a directory'), check silent."""
    (world.hostile / "INDEX.md").unlink()
    (world.hostile / "INDEX.md").mkdir()
    (world.hostile / "INDEX.md/inner.md").write_text("# Inner\n")
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "INDEX.md/inner.md")
    assert "INDEX.md as a folder" in out.stderr
    repaired(world)
    assert (world.victim / "INDEX.md").is_file()


def test_a_refusal_and_a_held_fsmem_yaml_in_one_fetch_are_said_together_and_one_run_takes_both(world):
    """F3: each message named only its own remedy, and following them looped."""
    os.symlink("../../outside/secret.txt", world.hostile / "topics/out.md")
    config = world.hostile / "fsmem.yaml"
    config.write_text(config.read_text().replace("policy: refuse", "policy: redact", 1))
    commit = push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 2 and commit[:12] in out.stderr and "topics/out.md" in out.stderr
    assert "secrets.policy" in out.stderr and "fsmem sync --repair --accept-config" in out.stderr, out.stderr
    done = sync(world.victim, "--repair", "--accept-config")
    assert done.returncode == 0, done.stderr
    assert "policy: redact" in (world.victim / "fsmem.yaml").read_text()
    assert not os.path.lexists(world.victim / "topics/out.md")


def test_a_link_that_a_later_push_points_at_a_plain_file_is_refused(world):
    """F4: a link to a folder, whose folder a later push makes a plain file."""
    (world.hostile / "shelf").mkdir()
    (world.hostile / "shelf/me.md").write_text("# Me\n")
    os.symlink("../shelf", world.hostile / "topics/folder-1")
    push(world.hostile)
    assert sync(world.victim).returncode == 0
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    shutil.rmtree(world.hostile / "shelf")
    (world.hostile / "shelf").write_text("plain\n")
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, "topics/folder-1")
    assert "which is not a memory file" in out.stderr


def test_a_folder_the_remote_turns_into_a_file_while_this_host_edits_in_it_leaves_no_git_leftover(world):
    """F5: the remote's file was left as `topics~<commit>`."""
    shutil.rmtree(world.hostile / "topics")
    (world.hostile / "topics").write_text("a plain file\n")
    push(world.hostile)
    Memory(world.victim, agent="w1").edit(S.SHARED, old="- owner: nobody", new="- owner: the victim")
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert "- owner: the victim" in (world.victim / S.SHARED).read_text()
    assert not any("~" in name for name in tree_names(world.origin)), tree_names(world.origin)
    assert (world.victim / "topics (edited on origin)").read_text() == "a plain file\n"


def test_a_file_kept_beside_a_folder_that_is_no_memory_file_is_reported_with_a_remedy_that_works(world):
    """Found by the sync fuzzer (explore): the remote's plain file kept as `topics (edited on origin)`, no memory
    file, was never reported by check, the sync's line named it twice, and its remedy (fsmem rm) refused it."""
    Memory(world.victim, agent="w1").write("topics/new.md", "# New\n\n- latest: x\n")
    shutil.rmtree(world.hostile / "topics")
    (world.hostile / "topics").write_text("a file where a folder was\n")
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    kept = "topics (edited on origin)"
    said = f"{kept}: the file topics as origin had it, kept by fsmem sync where the other side made topics a folder"
    assert said in out.stdout
    assert (world.victim / kept).read_text() == "a file where a folder was\n"
    check = fsmem(world.victim, "check", check=False)
    assert check.returncode == 1
    [line] = [line for line in check.stdout.splitlines() if line.startswith(f"{kept}:1: ")]
    remedy = line.split("then remove it: ", 1)[1]
    done = subprocess.run(remedy, shell=True, capture_output=True, text=True, env=S.env())  # as a person runs it
    assert done.returncode == 0, done.stderr
    assert not (world.victim / kept).exists() and (world.victim / "topics/new.md").exists()
    assert kept not in fsmem(world.victim, "check", check=False).stdout
    assert git(world.victim, "status", "--porcelain") == ""
    assert sync(world.victim).returncode == 0
    assert kept not in tree_names(world.origin)


def test_a_folder_the_remote_turns_into_a_link_while_this_host_writes_in_it_is_refused(world):
    """F7: the link hid this host's new note, and the other host's merge then failed for good."""
    memory = Memory(world.victim, agent="w1")
    memory.note("- employer: first", subject="people/Ann Lee")
    assert sync(world.victim).returncode == 0
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    day = next(
        p for p in (world.hostile / "sessions").rglob("*") if p.is_dir() and not any(x.is_dir() for x in p.iterdir())
    )
    shutil.rmtree(day)
    os.symlink(os.path.relpath(world.hostile / "topics", day.parent), day)
    commit = push(world.hostile)
    memory.note("- employer: second", subject="people/Ann Lee")
    out = sync(world.victim)
    rel = day.relative_to(world.hostile).as_posix()
    refused(out, commit, rel)
    assert "where this host has a folder" in out.stderr
    repaired(world)
    assert (world.victim / rel).is_dir() and not (world.victim / rel).is_symlink()
    assert not any("~" in name for name in tree_names(world.origin))


def test_check_reports_every_link_of_the_committed_tree_that_breaks_the_invariant(tmp_path):
    root = tmp_path / "m"
    fsmem(root, "init", "--git", str(root))
    (root / "topics/a/b").mkdir(parents=True)
    (root / "topics/a/b/keep.md").write_text("---\ntitle: Keep\n---\n# Keep\n")
    fsmem(root, "index")
    os.symlink("a/b/../../../..", root / "topics/escape")  # leads out, though no .md name: the walk never sees it
    os.symlink("../INDEX.md", root / "topics/index.md")  # a generated file
    os.symlink("a", root / "topics/fine")  # a folder of memory: fine
    S.git("add", "-A", cwd=root)
    S.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "links by hand", cwd=root)
    check = fsmem(root, "check", check=False).stdout
    assert "topics/escape:1: a symbolic link that leads outside the memory" in check
    assert "topics/index.md:1: a symbolic link that leads to INDEX.md, which fsmem generates" in check
    assert "topics/fine:" not in check


def test_the_repair_of_a_document_the_remote_made_a_link_out_keeps_this_hosts_document(world):
    """F9: the repair deleted this host's document while saying it kept it."""
    (world.hostile / S.SHARED).unlink()
    os.symlink("../../outside/secret.txt", world.hostile / S.SHARED)
    commit = push(world.hostile)
    refused(sync(world.victim), commit, S.SHARED)
    repaired(world)
    assert not (world.victim / S.SHARED).is_symlink()
    assert (world.victim / S.SHARED).read_text() == S.SHARED_TEXT
    assert git(world.origin, "show", f"main:{S.SHARED}") == S.SHARED_TEXT


def test_a_document_the_remote_makes_a_link_to_itself_is_refused_as_a_loop_and_the_repair_keeps_it(world):
    """F9, as the fuzzer found it again: a note made a link to itself."""
    (world.hostile / S.SHARED).unlink()
    os.symlink("shared.md", world.hostile / S.SHARED)
    commit = push(world.hostile)
    out = sync(world.victim)
    refused(out, commit, S.SHARED)
    assert "a symbolic link that loops" in out.stderr
    repaired(world)
    assert (world.victim / S.SHARED).read_text() == S.SHARED_TEXT and not (world.victim / S.SHARED).is_symlink()


def test_check_reports_a_name_git_refuses_already_in_this_hosts_history(tmp_path):
    root = tmp_path / "m"
    fsmem(root, "init", "--git", str(root))
    blob = git(root, "hash-object", "-w", "--stdin", input="x\n").strip()
    inner = git(root, "mktree", input=f"100644 blob {blob}\tconfig.md\n").strip()
    topics = git(root, "mktree", input=f"040000 tree {inner}\tGIT~1\n").strip()
    top = [line for line in git(root, "ls-tree", "HEAD").splitlines() if not line.endswith("\ttopics")]
    tree = git(root, "mktree", input="\n".join([*top, f"040000 tree {topics}\ttopics"]) + "\n").strip()
    commit = git(root, "commit-tree", tree, "-p", "HEAD", "-m", "from an old version", input="").strip()
    git(root, "update-ref", "HEAD", commit)
    check = fsmem(root, "check", check=False).stdout
    assert "topics/GIT~1/config.md:1: a name git refuses to check out" in check and "git mv" in check, check


# -- a document one side made a symbolic link while the other changed it -----------------------------------------
def untracked(root: Path) -> list[str]:
    return [line for line in git(root, "status", "--porcelain", "--untracked-files=all").splitlines() if line]


def test_a_document_the_remote_makes_a_link_while_this_host_rewrites_it_stays_this_hosts_file(world):
    """Found by the sync fuzzer (explore): git's merge kept this host's text only as `topics/shared.md~HEAD`,
    a file no listing shows and check did not report, and the remote's link took the document's place."""
    (world.hostile / S.SHARED).unlink()
    os.symlink("../README.md", world.hostile / S.SHARED)  # a link inside, to a memory file: taken on its own
    push(world.hostile)
    text = "# Shared\n\n- rewritten: by the victim\n"
    Memory(world.victim, agent="w1").write(S.SHARED, text)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    shared = world.victim / S.SHARED
    assert not shared.is_symlink() and "- rewritten: by the victim" in shared.read_text()
    assert f"kept {S.SHARED} as a file: origin/main made it a link to README.md" in out.stdout.splitlines()
    assert not any("~" in p.name for p in (world.victim / "topics").iterdir())
    assert not any("~" in name for name in tree_names(world.origin)), tree_names(world.origin)
    assert git(world.origin, "cat-file", "-p", f"main:{S.SHARED}") == shared.read_text()
    assert untracked(world.victim) == []
    assert S.SHARED in {entry.path for entry in Memory(world.victim).ls("topics").entries}
    assert S.SHARED not in fsmem(world.victim, "check", check=False).stdout
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")  # the other host takes the same file
    assert not (world.hostile / S.SHARED).is_symlink() and (world.hostile / S.SHARED).read_text() == shared.read_text()


def test_a_document_this_host_made_a_link_that_the_remote_changes_becomes_the_remotes_file(world):
    """The same rule whichever side made the link: the changed file is kept, the link is not."""
    (world.victim / S.SHARED).unlink()
    os.symlink("../README.md", world.victim / S.SHARED)
    assert sync(world.victim).returncode == 0  # the link committed (outside fsmem) and pushed
    (world.victim / S.SHARED).unlink()
    os.symlink("../profile/identity.md", world.victim / S.SHARED)  # re-pointed here ...
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    (world.hostile / S.SHARED).unlink()
    (world.hostile / S.SHARED).write_text("# Shared\n\n- written: on the remote\n")  # ... a file again there
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    shared = world.victim / S.SHARED
    assert not shared.is_symlink() and shared.read_text() == "# Shared\n\n- written: on the remote\n"
    assert f"{S.SHARED}: one host made it a symbolic link while the other changed it" in out.stdout
    assert not any("~" in name for name in tree_names(world.origin)) and untracked(world.victim) == []


def test_a_link_both_sides_repointed_stays_a_link_never_a_file_of_its_target_path(world):
    """A link both hosts re-pointed (each its own target) keeps this host's, as any file both sides changed."""
    (world.victim / S.SHARED).unlink()
    os.symlink("../README.md", world.victim / S.SHARED)  # this host's file made a link here (a remote's is not taken)
    assert sync(world.victim).returncode == 0
    (world.victim / S.SHARED).unlink()
    os.symlink("../profile/identity.md", world.victim / S.SHARED)
    git(world.hostile, "pull", "-q", "--no-rebase", "origin", "main")
    (world.hostile / S.SHARED).unlink()
    os.symlink("../profile/../README.md", world.hostile / S.SHARED)
    push(world.hostile)
    out = sync(world.victim)
    assert out.returncode == 0, out.stderr
    assert os.readlink(world.victim / S.SHARED) == "../profile/identity.md"
    assert f"{S.SHARED}: both hosts changed it; this host's version kept" in out.stdout
    assert not [line for line in out.stdout.splitlines() if line.startswith("kept ")]  # the boundary took it
    assert git(world.origin, "ls-tree", "main", S.SHARED).startswith("120000 ")
    assert untracked(world.victim) == []


@pytest.mark.parametrize("committed", [True, False])
def test_check_reports_a_copy_a_git_merge_by_hand_left_beside_a_document(world, committed):
    """`git merge` renames one side of a file/link conflict to `NAME~HEAD` (or `~` and the other branch): no
    memory file, so no listing shows it; check names it and what to do."""
    leftover = world.victim / "topics/shared.md~origin_main"
    leftover.write_text("# Shared\n\n- rewritten: kept aside by git\n")
    if committed:
        git(world.victim, "add", "--", "topics/shared.md~origin_main")
        git(world.victim, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a merge by hand")
    check = fsmem(world.victim, "check", check=False)
    assert check.returncode == 1
    [line] = [line for line in check.stdout.splitlines() if line.startswith("topics/shared.md~origin_main:1: ")]
    assert "a copy of topics/shared.md that a git merge left" in line, line
    assert ("then remove it: git -C " if committed else "then remove it: rm -- ") in line, line
    remedy = line.split("then remove it: ", 1)[1]
    done = subprocess.run(remedy, shell=True, capture_output=True, text=True, env=S.env())  # as a person runs it
    assert done.returncode == 0, done.stderr
    assert not leftover.exists() and untracked(world.victim) == []
    assert "topics/shared.md~origin_main" not in fsmem(world.victim, "check", check=False).stdout
