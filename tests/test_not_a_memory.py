"""Issue #19, finding 8: a memory is a folder with fsmem.yaml.

Any folder given as `--root` used to be treated as a memory: `note` and
`consolidate` wrote `sessions/`, `topics/`, INDEX.md and `.fsmem/` into a folder
without fsmem.yaml. Every command given such a folder exits 2 with "not an
fsmem memory: … (create one with: fsmem init DIR)" and writes nothing; the
commands that create memories and the token commands are the exceptions.
`fsmem init DIR` makes a folder already in use (an Obsidian vault) a memory,
adding only what it lacks and changing no file already there.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

import fsmem
from fsmem import Memory
from fsmem.cli import COMMANDS
from fsmem.errors import AlreadyExists, NotAMemory, RootNotFound

# Every command that works on a memory, with the least it needs to get that far.
ON_A_MEMORY: dict[str, list[str]] = {
    "ls": [],
    "grep": ["alpha"],
    "read": ["a.md"],
    "links": ["a.md"],
    "stat": ["a.md"],
    "note": ["- employer: Globex"],
    "write": ["b.md", "--keep-body", "--set", "title=B"],
    "edit": ["a.md", "--old", "alpha", "--new", "beta"],
    "rm": ["a.md"],
    "mv": ["a.md", "c.md"],
    "check": [],
    "watch": [],
    "tools": [],
    "connect": ["cursor"],
    "mcp": [],
    "agent": ["add", "bot"],
    "hook": ["claude-code", "--print-config"],  # the hook itself exits 0 (tests/test_hook_claude_code.py)
    "stats": [],
    "context": [],
    "consolidate": [],
    "distill": ["--command", "true"],
    "config": ["--local"],
    "index": [],
    "search": ["alpha"],
    "timeline": ["people/Alpha"],
    "recall": ["alpha"],
    "evaluate": ["{evalset}"],
    "log": [],
    "show": ["a.md", "--at", "HEAD"],
    "diff": [],
    "restore": ["a.md", "--at", "HEAD"],
    "revert": ["HEAD"],
    "sync": [],
    "serve": ["--port", "0"],
}
# Commands that make memories or need none: init, import locomo (makes TARGET/<sample>), the token store.
MAKE_OR_NEED_NONE = {"init", "import", "token"}


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder`, hidden ones included: a kind and a content hash."""
    found = {}
    for current, folders, files in os.walk(folder):
        for name in folders + files:
            full = Path(current, name)
            rel = full.relative_to(folder).as_posix()
            if full.is_symlink():
                found[rel] = "link:" + os.readlink(full)
            elif full.is_dir():
                found[rel] = "folder"
            else:
                found[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return found


def notes_folder(base: Path) -> Path:
    """A folder of Markdown someone keeps, as git keeps it: no fsmem.yaml."""
    folder = base / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# A\nalpha\n")
    (folder / "sub" / "b.md").write_text("---\ntitle: B\n---\nbeta\n")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


# Commands that would keep running had they got past the refusal: a real process, which a timeout stops.
RUN_ON = {"watch", "mcp", "serve"}


def run(*args: str, env_extra: dict[str, str] | None = None, process: bool = False) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`), or as a real `fsmem` process (`process`)."""
    env = without_fsmem()
    env.update(env_extra or {})
    return (cli_runner.real if process else cli_runner.run)(args, text=True, env=env, timeout=60)


def test_the_table_names_every_command():
    assert set(ON_A_MEMORY) | MAKE_OR_NEED_NONE == set(COMMANDS)


def test_every_command_refuses_a_folder_without_fsmem_yaml_and_writes_nothing(tmp_path):
    folder = notes_folder(tmp_path)
    evalset = tmp_path / "eval.jsonl"
    evalset.write_text('{"question": "alpha?", "gold": [{"text": "alpha"}]}\n')
    before = snapshot(folder)
    for name, args in ON_A_MEMORY.items():
        argv = [a.replace("{evalset}", str(evalset)) for a in args]
        done = run("--root", str(folder), name, *argv, process=name in RUN_ON)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert done.stderr == (
            f"fsmem: error: not an fsmem memory: {folder} holds no fsmem.yaml (create one with: fsmem init {folder})\n"
        ), name
        assert done.stdout == "", name
        assert snapshot(folder) == before, name
    assert not (folder / ".fsmem").exists() and not (folder / "sessions").exists()


def test_fsmem_root_in_the_environment_is_refused_alike(tmp_path):
    folder = notes_folder(tmp_path)
    before = snapshot(folder)
    for name in ("note", "consolidate", "ls"):
        environment = {**os.environ, "FSMEM_ROOT": str(folder)}
        done = cli_runner.same_as_a_process([name, *ON_A_MEMORY[name]], env=environment)  # a process's bytes too
        assert done.returncode == 2 and b"not an fsmem memory" in done.stderr, name
    assert snapshot(folder) == before


def test_serve_refuses_a_memory_argument_without_fsmem_yaml(tmp_path):
    folder = notes_folder(tmp_path)
    done = run("serve", "--memory", f"team={folder}", "--port", "0", "--tokens", str(tmp_path / "t.json"), process=True)
    assert done.returncode == 2
    assert f"not an fsmem memory: {folder} holds no fsmem.yaml (create one with: fsmem init {folder})" in done.stderr
    assert not (folder / ".fsmem").exists()


def test_a_missing_folder_and_a_file_say_so(tmp_path):
    (tmp_path / "file").write_text("x")
    gone = run("--root", str(tmp_path / "gone"), "ls")
    assert gone.returncode == 2 and "not an fsmem memory: " in gone.stderr and "does not exist" in gone.stderr
    file = run("--root", str(tmp_path / "file"), "note", "x")
    assert file.returncode == 2 and "is not a folder" in file.stderr
    assert not (tmp_path / "gone").exists() and (tmp_path / "file").read_text() == "x"


def test_memory_of_a_folder_without_fsmem_yaml_raises_the_typed_error(tmp_path):
    folder = notes_folder(tmp_path)
    with pytest.raises(NotAMemory, match=r"^not an fsmem memory: .* \(create one with: fsmem init .*\)$"):
        Memory(folder)
    assert issubclass(NotAMemory, RootNotFound) and fsmem.NotAMemory is NotAMemory
    assert "NotAMemory" in fsmem.__all__
    assert not (folder / ".fsmem").exists()


def test_init_makes_a_folder_of_markdown_a_memory_and_changes_no_file_there(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "app.json").write_text('{"theme": "dark"}')
    (vault / "README.md").write_text("# My vault\nnot the template's README\n")
    (vault / "daily").mkdir()
    (vault / "daily" / "2026-11-30.md").write_bytes(b"- met Adam\r\n- no front matter, CRLF\r\n")
    (vault / "picture.png").write_bytes(bytes(range(256)))
    before = snapshot(vault)
    done = run("init", str(vault))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"made {vault.resolve()} a memory: added profile/identity.md, fsmem.yaml;")
    after = snapshot(vault)
    assert {rel: after[rel] for rel in before} == before  # every file already there: the same bytes
    assert set(after) - set(before) == {"fsmem.yaml", "profile", "profile/identity.md"}
    listed = run("--root", str(vault), "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"README.md", "daily/2026-11-30.md", "profile/identity.md"} <= {
        e["path"] for e in json.loads(listed.stdout)["entries"]
    }
    listed_state = snapshot(vault)
    again = run("init", str(vault))
    assert again.returncode == 2 and "already holds a memory" in again.stderr
    assert snapshot(vault) == listed_state


def test_init_never_writes_through_a_link_or_over_a_name_in_use(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "folder"
    folder.mkdir()
    os.symlink(outside, folder / "profile")  # the template's profile/ would be written into `outside`
    (folder / "README.md").mkdir()  # a folder where the template has a file
    Memory.init(folder)
    assert os.listdir(outside) == []
    assert (folder / "README.md").is_dir() and (folder / "fsmem.yaml").is_file()


def test_init_of_a_new_folder_copies_the_whole_template_and_refuses_a_file(tmp_path):
    created = run("init", str(tmp_path / "new"))
    assert created.returncode == 0 and created.stdout.startswith("created a memory in ")
    made = {rel for rel in snapshot(tmp_path / "new") if not rel.startswith(".fsmem")}
    assert made == {"README.md", "fsmem.yaml", "profile", "profile/identity.md"}
    (tmp_path / "plain").write_text("x")
    with pytest.raises(AlreadyExists, match="is not a folder"):
        Memory.init(tmp_path / "plain")
    assert (tmp_path / "plain").read_text() == "x"


def test_init_with_git_on_a_vault_keeps_its_files_and_gives_it_history(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# Note\n")
    (vault / ".gitignore").write_text("*.tmp\n")
    before = snapshot(vault)
    memory = Memory.init(vault, git=True)
    after = snapshot(vault)
    assert {rel: after[rel] for rel in before if rel != ".gitignore"} == {
        rel: sha for rel, sha in before.items() if rel != ".gitignore"
    }
    assert (vault / ".gitignore").read_text().startswith("*.tmp\n")  # history adds its lines, keeps the user's
    assert memory.history is not None and memory.log().entries
