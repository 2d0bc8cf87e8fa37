"""A command that needs an extra says which one, and exits 2: never a traceback or a bare "No module named".

Each command runs in a subprocess where the extra's package cannot be imported
(tests/hidden_modules.py), as it runs for a user who did not install the extra.
"""

from __future__ import annotations

import importlib.util

import pytest
from hidden_modules import run_fsmem

from fsmem import Memory

# what each extra brings that its command imports (hidden one at a time below)
PACKAGES = {"server": ("anyio", "uvicorn", "mcp", "starlette"), "mcp": ("mcp", "anyio", "pydantic")}
EVALSET = "questions:\n  - question: what cycle?\n    answer: monthly\n    gold: [topics/billing.md]\n"


@pytest.fixture
def root(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    return memory.root


@pytest.mark.parametrize(
    ("args", "hidden", "extra"),
    [
        (["serve", "--port", "0"], "anyio", "server"),
        (["serve", "--port", "0"], "uvicorn", "server"),
        (["serve", "--port", "0"], "mcp", "server"),
        (["serve", "--port", "0"], "starlette", "server"),
        (["mcp"], "mcp", "mcp"),
        (["mcp"], "anyio", "mcp"),
        (["mcp"], "pydantic", "mcp"),
    ],
)
def test_a_server_without_its_extra_names_the_extra_and_exits_2(root, args, hidden, extra):
    for package in PACKAGES[extra]:  # else the first package missing is named, not the one hidden
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"hides one package of the {extra} extra, which is not installed: pip install 'fsmem[{extra}]'")
    done = run_fsmem(["--root", str(root), *args], hide=[hidden], input="", timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"fsmem: error: fsmem {args[0]} needs the fsmem[{extra}] extra (no module named {hidden!r}); "
        f"install it with: pip install 'fsmem[{extra}]'"
    ]


def test_evaluate_plot_without_matplotlib_names_the_plot_extra(root, tmp_path):
    evalset = tmp_path / "eval.yaml"
    evalset.write_text(EVALSET)
    done = run_fsmem(
        ["--root", str(root), "evaluate", str(evalset), "--plot", str(tmp_path / "p.png")], hide=["matplotlib"]
    )
    assert done.returncode == 2, done.stderr
    assert "needs the fsmem[plot] extra (no module named 'matplotlib')" in done.stderr
    assert "pip install 'fsmem[plot]'" in done.stderr
    assert not (tmp_path / "p.png").exists()


def test_the_anthropic_drop_in_without_its_sdk_names_the_extra():
    done = run_fsmem(["-c", "import fsmem.integrations.anthropic"], hide=["anthropic"])
    assert done.returncode == 1
    assert (
        "ImportError: fsmem.integrations.anthropic needs the fsmem[anthropic] extra; "
        "install it with: pip install 'fsmem[anthropic]'" in done.stderr
    ), done.stderr


def test_the_core_commands_need_no_extra(root):
    done = run_fsmem(["--root", str(root), "grep", "monthly"], hide=["mcp", "anyio", "uvicorn", "matplotlib"])
    assert done.returncode == 0, done.stderr
    assert "topics/billing.md" in done.stdout
