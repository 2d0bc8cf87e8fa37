"""One name per idea: every command, Memory method and tool schema spells budget, paging, output and filters alike.

The walk fails when a command lacks an option its kind of answer needs, when
the CLI, the Python API and a tool name the same parameter differently, when
an old spelling reappears, or when a shared option's help text drifts from
its one declaration. The spellings 0.2 renamed are gone in 0.3, refused where a user types them.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from fsmem import Memory
from fsmem.agents import tools
from fsmem.cli import COMMANDS, cli
from fsmem.errors import InvalidArgument

FSMEM = str(Path(sys.executable).with_name("fsmem"))

LIST_ANSWERS = {"ls", "grep", "search", "log"}  # list-shaped: they page
BUDGETED = LIST_ANSWERS | {"read", "context", "recall", "evaluate", "show", "diff"}  # they answer within a token budget
FILTERED = {"ls", "grep", "search"}
HISTORY_AWARE = {"grep", "read", "search"}  # superseded facts hidden unless asked
NO_OUTPUT = {"mcp", "serve"}  # a server speaks its protocol, not --json
# spellings that mean an idea fsmem names otherwise; none may appear as a visible option or argument
BANNED = {"k", "limit", "top", "top_k", "max_rows", "rows", "budget", "quiet", "context_file", "page", "skip", "start"}
# the CLI's names for Memory's parameters where Python cannot use the word (type_ is `type`)
CLI_TO_API = {"type_": "type", "as_json": None, "sets": "set", "format_": None, "plot_file": None, "seen_file": "seen"}
# command name -> Memory method, where the CLI is a skin over one method
METHOD_OF = {
    "ls": "ls",
    "grep": "grep",
    "read": "read",
    "search": "search",
    "recall": "recall",
    "note": "note",
    "write": "write",
    "edit": "edit",
    "rm": "rm",
    "mv": "mv",
    "check": "check",
    "consolidate": "consolidate",
    "index": "index",
    "watch": "watch",
    "stats": "stats",
    "context": "context",
    "log": "log",
    "show": "show",
    "diff": "diff",
    "restore": "restore",
    "revert": "revert",
    "sync": "sync",
}


def command(name: str) -> click.Command:
    found = cli.get_command(click.Context(cli), name)
    assert found is not None, name
    return found


def visible_options(cmd: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in cmd.params if isinstance(p, click.Option) and not p.hidden and p.name}


def all_flags(cmd: click.Command) -> set[str]:
    return {flag for p in cmd.params if isinstance(p, click.Option) and not p.hidden for flag in p.opts}


def method_parameters(name: str) -> set[str]:
    return set(list(inspect.signature(getattr(Memory, name)).parameters)[1:])  # after the memory itself


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_global_options_after_its_name(name):
    cmd = command(name)
    if isinstance(cmd, click.Group):
        pytest.skip("a group of commands: its subcommands are checked where they are plain commands")
    assert {"--root", "--agent"} <= all_flags(cmd), name
    if name not in NO_OUTPUT:
        assert "--json" in all_flags(cmd), name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_kind_of_answer_has_its_options(name):
    cmd = command(name)
    if isinstance(cmd, click.Group):
        pytest.skip("group")
    flags = all_flags(cmd)
    if name in LIST_ANSWERS:
        assert {"--offset", "--max-results", "--max-tokens"} <= flags, name
    if name in BUDGETED:
        assert "--max-tokens" in flags, name
    if name in FILTERED:
        assert {"--type", "--tag", "--updated-after"} <= flags, name
    if name in HISTORY_AWARE:
        assert "--include-superseded" in flags, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_uses_a_spelling_fsmem_names_otherwise(name):
    cmd = command(name)
    visible = {p.name for p in cmd.params if not getattr(p, "hidden", False)}
    assert not visible & BANNED, (name, visible & BANNED)


def test_shared_options_have_one_help_text_everywhere():
    helps: dict[str, set[str]] = {}
    for name in COMMANDS:
        cmd = command(name)
        for option in visible_options(cmd).values():
            if option.name in (
                "offset",
                "max_results",
                "max_tokens",
                "type_",
                "tag",
                "updated_after",
                "json",
                "as_json",
            ):
                helps.setdefault(option.name, set()).add(option.help or "")
            if option.name in ("include_superseded",):
                helps.setdefault(option.name, set()).add(option.help or "")
    assert helps and all(len(texts) == 1 for texts in helps.values()), helps


@pytest.mark.parametrize("name", sorted(METHOD_OF))
def test_cli_and_python_name_every_parameter_alike(name):
    cmd = command(name)
    api = method_parameters(METHOD_OF[name])
    for param in cmd.params:
        if getattr(param, "hidden", False) or not param.expose_value or param.name is None:
            continue
        wanted = CLI_TO_API.get(param.name, param.name)
        if wanted is None:
            continue
        if name == "write" and param.name == "keep_body":
            continue  # how the CLI reads the body from stdin, not an idea of the API
        if name == "note" and param.name == "text":
            continue
        assert wanted in api, (name, param.name, sorted(api))


@pytest.mark.parametrize("history", [False, True])
def test_tool_schemas_use_the_python_names(tmp_path, history):
    memory = Memory.init(tmp_path / "mem", git=history)  # with history, log and show are offered too
    for definition in tools.definitions(memory, format="json"):
        method = {"ls": "ls"}.get(definition["name"], definition["name"])
        api = method_parameters(method)
        for parameter in definition["parameters"]["properties"]:
            assert parameter in api, (definition["name"], parameter)
            assert parameter not in BANNED, (definition["name"], parameter)
        if definition["name"] in LIST_ANSWERS:
            assert {"offset", "max_results"} <= set(definition["parameters"]["properties"]), definition["name"]


def test_list_answers_share_their_json_fields(demo_memory):
    page_fields = {"total", "offset", "left_out", "next_offset", "truncated", "cut_by", "tokens"}
    answers = {
        "ls": demo_memory.ls(max_results=2),
        "grep": demo_memory.grep("billing", max_results=2),
        "search": demo_memory.search("billing", max_results=2),
    }
    for name, answer in answers.items():
        data = answer.to_dict()
        assert page_fields <= set(data), (name, page_fields - set(data))
        assert data["truncated"] and data["next_offset"] == 2 and data["cut_by"] == "results", name


def run(*args: str, root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    return subprocess.run([FSMEM, *args], capture_output=True, text=True, env=env, cwd=root, timeout=60)


def test_global_options_work_after_the_subcommand(demo_memory, tmp_path):
    before = run("--root", str(demo_memory.root), "ls", "--json", root=tmp_path)
    after = run("ls", "--root", str(demo_memory.root), "--json", root=tmp_path)
    assert before.returncode == after.returncode == 0, after.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    refused = run("note", "x", "--root", str(demo_memory.root), "--agent", "reviewer", root=tmp_path)
    assert refused.returncode == 2 and "read-only" in refused.stderr


def test_a_note_may_start_with_the_fact_syntax(demo_memory, tmp_path):
    done = run(
        "--root", str(demo_memory.root), "note", "- employer: Globex", "--subject", "people/Adam Smith", root=tmp_path
    )
    assert done.returncode == 0, done.stderr
    note = next((demo_memory.root / "sessions").rglob(f"default-{demo_memory.host_id}.md")).read_text()
    assert "## people/Adam Smith\n- employer: Globex\n" in note
    found = run("--root", str(demo_memory.root), "grep", "- employer: Globex", "-F", root=tmp_path)
    assert found.returncode == 0 and "- employer: Globex" in found.stdout
    typo = run("--root", str(demo_memory.root), "note", "x", "--sesion", "y", root=tmp_path)
    assert typo.returncode == 2 and "No such option" in typo.stderr  # a mistyped option is not stored as text


def test_ls_pages_with_offset_like_grep(demo_memory):
    seen, offset = [], 0
    while offset is not None:
        page = demo_memory.ls(offset=offset, max_results=3)
        seen += [e.path for e in page.entries]
        offset = page.page.next_offset
    assert seen == [m.path for m in demo_memory.files()] and len(seen) == 11


# The spellings 0.2 renamed, gone in 0.3: (what a user types, the last line of the answer). On the CLI click's own
# error, with the options or commands it could mean (`fsmem.cli.options.did_you_mean`).
REMOVED_OPTIONS = [
    (("search", "billing", "--k", "1"), "Error: No such option '--k'."),
    (("grep", "proration", "--context", "1"), "Error: No such option '--context'. Did you mean '--context-lines'?"),
    (("recall", "x", "--context-file", "-"), "Error: No such option '--context-file'. Did you mean '--seen-file'?"),
    (("watch", "--quiet", "1"), "Error: No such option '--quiet'."),
    (("evaluate", "e.yaml", "--k", "1"), "Error: No such option '--k'."),
    (("eval", "e.yaml"), "Error: No such command 'eval'. Did you mean 'evaluate'?"),
]


@pytest.mark.parametrize("argv, last_line", REMOVED_OPTIONS, ids=[" ".join(a) for a, _ in REMOVED_OPTIONS])
def test_a_spelling_removed_in_0_3_is_a_usage_error_on_the_cli(demo_memory, capsys, argv, last_line):
    from fsmem.cli.app import run as run_in_process

    with pytest.raises(SystemExit) as done:
        run_in_process(["--root", str(demo_memory.root), *argv])
    out, err = capsys.readouterr()
    assert (done.value.code, out, err.splitlines()[-1]) == (2, "", last_line)


def test_a_spelling_removed_in_0_3_is_refused_by_name_in_python_and_by_the_tools(demo_memory):
    calls = {
        "search": lambda: demo_memory.search("billing", k=1),
        "grep": lambda: demo_memory.grep("proration", context=1),
        "recall": lambda: demo_memory.recall("proration", context="x"),
        "watch": lambda: demo_memory.watch(quiet=1.0),
    }
    for method, call in calls.items():
        with pytest.raises(
            InvalidArgument, match=rf"^Memory\.{method}\(\) has no argument named '(k|context|quiet)'; it takes "
        ):
            call()
    for gone in ("write_index", "memory_tool", "evaluate"):  # Memory.index(), MemoryTool.over(), evaluation.evaluate()
        assert not hasattr(demo_memory, gone), gone
    assert "total_matches" not in demo_memory.grep("proration").to_dict()
    listed = tools.call(demo_memory, "list", {"path": "topics"})
    assert listed.is_error and listed.text.startswith("error: unknown tool 'list'; the tools are: ls, grep,")
    searched = tools.call(demo_memory, "search", {"query": "billing", "k": 1})
    assert searched.is_error and searched.text.startswith("error: unknown argument 'k' for search; its arguments are:")
    grepped = tools.call(demo_memory, "grep", {"pattern": "billing", "context": 1})
    assert grepped.is_error and "unknown argument 'context' for grep" in grepped.text


def test_the_package_exports_its_public_types_and_errors_lazily():
    import subprocess as sp

    import fsmem

    assert set(fsmem.__all__) == {"__version__", *fsmem._EXPORTS}
    for name in fsmem._EXPORTS:
        assert getattr(fsmem, name).__name__ == name
    # what type checkers read (the imports under TYPE_CHECKING, each re-exported `as` itself) is the same list
    import ast

    tree = ast.parse(Path(fsmem.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    assert typed == fsmem._EXPORTS
    assert issubclass(fsmem.PathEscape, fsmem.FsmemError)
    probe = "import sys, fsmem; print(sorted(m for m in sys.modules if m.startswith('fsmem')))"
    loaded = sp.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['fsmem']"  # importing the package loads nothing else until a name is used
