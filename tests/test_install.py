"""`pip install fsmem` without extras gives every core command: ls, grep, read, search, consolidate, watch.

The package's wheel is built from this checkout (once a session, `fsmem_wheel`
in conftest.py) and installed into a fresh virtual environment that sees none of
the test environment's packages but those fsmem's core requirements pull in
(linked from it, tests/venvs.py), so a core command that needs an optional
package fails here.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from child_env import child_env
from conftest import made_once_a_run
from venvs import new_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh_venv(fsmem_wheel, tmp_path_factory) -> Path:
    """One environment a run: `make test` deals this module's longest tests out to different workers first."""

    def make(folder: Path) -> Path:
        return new_venv(folder / "venv", str(fsmem_wheel), sharing=["fsmem"], leaving_out=["fsmem"]).parent.parent

    return made_once_a_run(tmp_path_factory, "install", make)


def run(venv: Path, *args: str, root: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(venv / "bin" / "fsmem"), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**child_env(), "FSMEM_NOW": "2026-11-30T12:00:00+00:00"},
    )
    if check:
        assert done.returncode == 0, f"fsmem {' '.join(args)}: {done.stderr}"
    return done


def test_the_package_installs_with_its_c_module_built(fresh_venv, tmp_path):
    """`pip install .` compiles fsmem/search/_native.c into the wheel: an installed fsmem searches with it,
    not with its Python twin (which runs only where no compiler was found)."""
    probe = "import fsmem.search.postings as p, fsmem.search._native as n; print(p._native is n, n.__file__)"
    python = str(fresh_venv / "bin" / "python")  # run away from the checkout, whose fsmem `-c` would import
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=child_env())
    assert done.returncode == 0, done.stderr
    found, path = done.stdout.split()
    assert found == "True" and path.startswith(str(fresh_venv)) and path.endswith(".so")


def test_no_extras_means_no_sdks(fresh_venv):
    probe = "import importlib.util as u; print([m for m in ('mcp', 'anthropic', 'matplotlib') if u.find_spec(m)])"
    found = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=child_env()
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_core_commands_work_without_extras(fresh_venv, tmp_path):
    root = tmp_path / "mem"
    subprocess.run(
        [str(fresh_venv / "bin" / "fsmem"), "init", str(root)], check=True, capture_output=True, env=child_env()
    )
    run(fresh_venv, "note", "- employer: Globex", "--subject", "people/Ada Quill", "--session", "s1", root=root)
    run(fresh_venv, "note", "- employer: Initech", "--subject", "people/Bo Chen", "--session", "s1", root=root)

    consolidated = json.loads(run(fresh_venv, "consolidate", "--json", root=root).stdout)
    assert consolidated["notes_consolidated"] == 1 and consolidated["facts_added"] == 2

    listed = json.loads(run(fresh_venv, "ls", "entities", "--json", root=root).stdout)
    assert [entry["path"] for entry in listed["entries"]] == [
        "entities/people/ada-quill.md",
        "entities/people/bo-chen.md",
    ]

    grepped = json.loads(run(fresh_venv, "grep", "Globex", "--json", root=root).stdout)
    assert any(match["path"] == "entities/people/ada-quill.md" for match in grepped["matches"])

    read = run(fresh_venv, "read", "entities/people/ada-quill.md", root=root).stdout
    assert "employer: Globex" in read

    found = json.loads(run(fresh_venv, "search", "Where does Ada work?", "--json", root=root).stdout)
    assert found["results"][0]["path"] == "entities/people/ada-quill.md"
    assert "Globex" in json.dumps(found["results"][0])


def test_watch_runs_without_extras(fresh_venv, tmp_path):
    root = tmp_path / "mem"
    subprocess.run(
        [str(fresh_venv / "bin" / "fsmem"), "init", str(root)], check=True, capture_output=True, env=child_env()
    )
    proc = subprocess.Popen(
        [str(fresh_venv / "bin" / "fsmem"), "--root", str(root), "watch", "--settle", "0.1"],
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert "watching" in proc.stderr.readline()
        (root / "topics").mkdir(exist_ok=True)
        (root / "topics" / "zebra.md").write_text("---\ntitle: Zebra crossings\ntopic: zebra\n---\n# Zebra\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            index = root / "INDEX.md"
            if index.is_file() and "Zebra crossings" in index.read_text():
                break
            time.sleep(0.1)
        else:
            pytest.fail("fsmem watch did not bring INDEX.md up to date")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_a_command_whose_extra_is_missing_says_which_and_exits_2(fresh_venv, tmp_path):
    """`fsmem mcp` / `fsmem serve` without their extra: an error (exit 2, not grep's 1 "nothing found") naming it."""
    root = tmp_path / "mem"
    subprocess.run(
        [str(fresh_venv / "bin" / "fsmem"), "init", str(root)], check=True, capture_output=True, env=child_env()
    )
    for args, extra in ((["mcp"], "fsmem[mcp]"), (["serve", "--port", "0"], "fsmem[server]")):
        done = run(fresh_venv, *args, root=root, check=False)
        assert done.returncode == 2, (args, done.stderr)
        assert f"pip install '{extra}'" in done.stderr.splitlines()[-1] and "Traceback" not in done.stderr
