"""The extras' floors are true: `fsmem mcp`, `fsmem serve` and the Anthropic drop-in run at the lowest SDKs allowed.

`fsmem[mcp]` once declared `mcp>=1.10` while the code needed the 2.x server
API, so `pip install 'fsmem[mcp]'` could give an `fsmem mcp` that does not
start (issue 19, finding 11). Here one fresh virtual environment takes fsmem
with the mcp, server and anthropic extras and every SDK pinned to the floor
that pyproject.toml declares (the extras agree on one floor per SDK, so one
environment serves them all; what else they need comes linked from the test
environment where its version will do, tests/venvs.py); the tests that drive
those faces with the SDKs' own clients (the MCP stdio and streamable HTTP
clients, the Anthropic tool runner), marked `sdk_face`, then run there, against
the installed package. The server's limits, load and shutdown are fsmem's own
code and run at the SDKs' newest releases only.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tomllib
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from child_env import child_env
from venvs import new_venv

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
SDK_EXTRAS = ("mcp", "server", "anthropic")
MODULES = ("test_mcp_server.py", "test_server_app.py", "test_integrations_anthropic.py")
# tests that may skip at a floor, and why
MAY_SKIP = {"test_same_answers_and_files_as_the_sdk_reference"}  # the SDK's reference class came after 0.84


def declared_floors() -> dict[str, str]:
    """Each SDK's floor, from the SDK extras of pyproject.toml: `NAME>=VERSION` only (with a platform's
    marker at most: uvloop has no Windows build), one floor per package."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors: dict[str, str] = {}
    for extra in SDK_EXTRAS:
        for requirement in extras[extra]:
            floor = r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9]+(?:\.[0-9]+)*)"
            match = re.fullmatch(floor + r"(?:\s*;\s*sys_platform\s*!=\s*'win32')?", requirement)
            assert match, f"fsmem[{extra}] requires {requirement!r}: say only its floor, as NAME>=VERSION"
            name, version = match.groups()
            assert floors.setdefault(name, version) == version, f"the extras declare two floors of {name}"
    return floors


def release(version: str) -> tuple[int, ...]:
    parts = [int(part) for part in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def test_each_sdk_has_one_floor_in_every_extra_that_needs_it():
    floors = declared_floors()
    assert set(floors) == {"mcp", "uvicorn", "httptools", "uvloop", "anthropic"}
    assert release(floors["mcp"]) >= (2,)  # fsmem.agents.mcp_server and fsmem.server use the 2.x server API


SDK_CLIENTS = {"session", "call", "streamable_http_client", "ClientSession"}  # test_server_app's ways to the SDK


def test_every_test_that_drives_a_face_with_an_sdks_client_runs_at_the_floors():
    """Only the tests marked `sdk_face` run at the floors: a test of the server that uses the MCP SDK's client is
    marked (one that posts raw HTTP is not), and the stdio and Anthropic modules are marked whole."""
    for module in MODULES:
        tree = ast.parse((TESTS / module).read_text(encoding="utf-8"))
        whole = [node for node in tree.body if isinstance(node, ast.Assign) and "pytestmark" in ast.unparse(node)]
        if module != "test_server_app.py":
            assert any("pytest.mark.sdk_face" in ast.unparse(node) for node in whole), module
            continue
        marked = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                uses = {name.id for name in ast.walk(node) if isinstance(name, ast.Name)} & SDK_CLIENTS
                is_marked = "pytest.mark.sdk_face" in map(ast.unparse, node.decorator_list)
                assert bool(uses) == is_marked, (node.name, uses)
                marked |= {node.name} if is_marked else set()
        assert len(marked) >= 5, marked


@pytest.mark.slow
def test_mcp_serve_and_the_anthropic_drop_in_work_at_their_floors(fsmem_wheel, tmp_path):
    floors = declared_floors()
    venv = tmp_path / "venv"
    wanted = [f"fsmem[{','.join(SDK_EXTRAS)}]", "pytest>=8", "pytest-asyncio>=0.23"]
    python = str(
        new_venv(
            venv,
            f"{wanted[0]} @ {fsmem_wheel.as_uri()}",
            *(f"{name}=={version}" for name, version in floors.items()),
            *wanted[1:],
            sharing=wanted,
            leaving_out=["fsmem", *floors],
        )
    )
    env = child_env()
    probe = "import importlib.metadata as m, json, fsmem; print(json.dumps([fsmem.__file__, {n: m.version(n) for n in %r}]))"
    where, versions = json.loads(
        subprocess.run(
            [python, "-c", probe % sorted(floors)], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
        ).stdout
    )
    assert Path(where).is_relative_to(venv)  # the installed package, not this checkout
    assert {name: release(v) for name, v in versions.items()} == {name: release(v) for name, v in floors.items()}

    report = tmp_path / "report.xml"
    ran = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *("-m", "sdk_face"),
            *(str(TESTS / m) for m in MODULES),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert ran.returncode == 0, f"at the floors {floors}:\n{ran.stdout[-6000:]}\n{ran.stderr[-2000:]}"
    cases = ElementTree.parse(report).getroot().iter("testcase")
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for case in cases:
        module = case.get("classname", "").rpartition(".")[2] + ".py"
        state = next((child.tag for child in case if child.tag in ("skipped", "failure", "error")), "passed")
        outcomes.setdefault(module, []).append((case.get("name", ""), state))
    assert sorted(outcomes) == sorted(MODULES)  # no module skipped whole (an SDK that failed to import)
    for module, results in outcomes.items():
        assert any(state == "passed" for _, state in results), module
        assert {name for name, state in results if state != "passed"} <= MAY_SKIP, (module, results)
