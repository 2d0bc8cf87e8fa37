"""One name per idea, and one list of them: the specs (`fsmem.spec`), checked against every face generated from them.

The walk fails when a command, a `Memory` method or a tool schema takes a parameter its operation's spec
does not declare (or spells it, or describes it, otherwise), when a page-shaped answer lacks the options
that page it, when an old spelling reappears, or when a shared option's help text drifts. The spellings
0.2 renamed are gone in 0.3, refused where a user types them.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.cli import COMMANDS, cli
from fsmem.cli.generated import help_of
from fsmem.errors import InvalidArgument
from fsmem.spec import API, CLI, TOOL, declared
from fsmem.spec.params import PAGE

FSMEM = str(Path(sys.executable).with_name("fsmem"))

NO_OUTPUT = {"mcp", "serve", "connect"}  # a server speaks its protocol, connect the client's format: not --json
# spellings that mean an idea fsmem names otherwise; none may appear as a visible option, argument or parameter
BANNED = {"k", "limit", "top", "top_k", "max_rows", "rows", "budget", "quiet", "context_file", "page", "skip", "start"}
GLOBAL = {"root", "agent", "as_json", "help"}  # every command's, not an operation's
# commands written by hand (not a declared operation) that are a skin over one Memory method
HAND_WRITTEN = {"sync": "sync", "watch": "watch"}


def command(name: str) -> click.Command:
    found = cli.get_command(click.Context(cli), name)
    assert found is not None, name
    return found


def commands_of(name: str) -> list[tuple[click.Command, list[str]]]:
    """The commands of a declared operation, and the parameters each gives itself: one, or under its group
    (`Cli.group`) one per value of its first parameter, which that subcommand's name gives."""
    op = declared()[name]
    if op.cli.group is None:
        return [(command(name), [])]
    group = command(op.cli.group)
    assert isinstance(group, click.Group), name
    first = op.on(CLI)[0].name
    found = [group.get_command(click.Context(group), value) for value in op.cli.values]
    assert all(found), name
    return [(sub, [first]) for sub in found if sub is not None]


def visible_options(cmd: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in cmd.params if isinstance(p, click.Option) and not p.hidden and p.name}


def all_flags(cmd: click.Command) -> set[str]:
    return {flag for p in cmd.params if isinstance(p, click.Option) and not p.hidden for flag in p.opts}


def method_parameters(name: str) -> list[str]:
    return list(inspect.signature(getattr(Memory, name)).parameters)[1:]  # after the memory itself


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_global_options_after_its_name(name):
    cmd = command(name)
    if isinstance(cmd, click.Group):
        pytest.skip("a group of commands: its subcommands are checked where they are plain commands")
    assert {"--root", "--agent"} <= all_flags(cmd), name
    if name not in NO_OUTPUT:
        assert "--json" in all_flags(cmd), name


def test_every_declared_operation_is_a_command_and_a_memory_method():
    for name, op in declared().items():
        if op.cli.group is None:
            assert COMMANDS[name] == f"generated:{name}", name
        else:
            assert op.cli.group in COMMANDS and name not in COMMANDS, name
        assert callable(getattr(Memory, name)), name


@pytest.mark.parametrize("name", sorted(declared()))
def test_the_command_carries_exactly_what_the_spec_declares(name):
    op = declared()[name]
    for cmd, given in commands_of(name):
        _carries_exactly(name, op, cmd, given)


def _carries_exactly(name, op, cmd, given):
    taken = {p.name: p for p in cmd.params if p.name not in GLOBAL}
    wanted = [p for p in [*op.on(CLI), *op.cli.extra] if p.name not in given]
    assert list(taken) == [p.name for p in wanted], name
    for param in wanted:
        made = taken[param.name]
        assert made.required == param.required, (name, param.name)
        if param.positional:
            assert isinstance(made, click.Argument), (name, param.name)
            continue
        assert isinstance(made, click.Option) and made.help == help_of(param), (name, param.name)
        assert made.opts == [f for f in (param.short, param.cli_flag) if f], (name, param.name)
        assert made.multiple == (param.kind in ("list", "dict")) and made.is_flag == (param.kind == "bool")


@pytest.mark.parametrize("name", sorted(declared()))
def test_the_python_method_takes_exactly_what_the_spec_declares(name):
    op = declared()[name]
    assert method_parameters(name) == [p.name for p in op.params], name
    assert all(p.on(API) for p in op.params), name  # Python takes every parameter; other faces take fewer


@pytest.mark.parametrize("history", [False, True])
def test_each_tool_schema_is_its_specs_tool_parameters(tmp_path, history):
    memory = Memory.init(tmp_path / "mem", git=history)  # with history, log and show are offered too
    offered = tools.definitions(memory, format="json")
    assert [d["name"] for d in offered] == [
        op.name for op in declared().values() if op.tool and (history or "history" not in op.needs)
    ]
    for definition in offered:
        op = declared()[definition["name"]]
        properties = definition["parameters"]["properties"]
        assert list(properties) == [p.name for p in op.on(TOOL)], op.name
        assert {name: prop["description"] for name, prop in properties.items()} == {
            p.name: p.description for p in op.on(TOOL)
        }
        assert definition["description"] == op.description and definition["writes"] == (not op.read_only)


@pytest.mark.parametrize("name", sorted(declared()))
def test_a_page_shaped_answer_has_the_options_that_page_it_on_every_face(name):
    op = declared()[name]
    if op.answer == "page":
        assert set(PAGE) <= set(op.params), name
    if op.answer in ("page", "text"):
        assert "max_tokens" in [p.name for p in op.on(CLI)], name  # a budgeted answer: a person may narrow it


def test_no_face_uses_a_spelling_fsmem_names_otherwise():
    for name in COMMANDS:
        cmd = command(name)
        visible = {p.name for p in cmd.params if not getattr(p, "hidden", False)}
        assert not visible & BANNED, (name, visible & BANNED)
    for op in declared().values():
        assert not {p.name for p in op.params} & BANNED, op.name


def test_shared_options_have_one_help_text_everywhere():
    helps: dict[str, set[str]] = {}
    shared = ("offset", "max_results", "max_tokens", "type", "tag", "updated_after", "as_json", "include_superseded")
    for name in COMMANDS:
        for option in visible_options(command(name)).values():
            if option.name in shared:
                helps.setdefault(option.name, set()).add(option.help or "")
    assert set(helps) == set(shared) and all(len(texts) == 1 for texts in helps.values()), helps


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_a_hand_written_command_and_python_name_every_parameter_alike(name):
    api = method_parameters(HAND_WRITTEN[name])
    for param in command(name).params:
        if getattr(param, "hidden", False) or not param.expose_value or param.name in GLOBAL:
            continue
        assert param.name in api, (name, param.name, api)


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
    env = without_fsmem()
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
    assert "## people/Adam Smith\n- employer: Globex (as of " in note  # stamped with the time of the write
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
    assert seen == [m.path for m in demo_memory.files()] and len(seen) == 12


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


def test_the_command_table_is_the_spec_and_the_hand_written_list():
    """Every command is a declared operation's or one of `fsmem.spec.commands`, which says why it is written by
    hand; none is both, and nothing else names a command."""
    from fsmem.spec.commands import HAND_WRITTEN

    generated = {op.name for op in declared().values() if op.cli.group is None}
    assert not generated & set(HAND_WRITTEN)
    assert set(COMMANDS) == generated | set(HAND_WRITTEN)
    assert all(len(command.reason) > 20 for command in HAND_WRITTEN.values())
    for name, command in HAND_WRITTEN.items():
        module, attribute = command.target.split(":")
        assert attribute in vars(__import__(f"fsmem.cli.{module}", fromlist=[attribute])), name


def test_memory_names_each_operation_for_the_type_checker_and_grep_as_the_spec_does():
    """`Memory`'s methods come from the spec at run time; its TYPE_CHECKING block (what an editor reads) must name
    every declared operation, and the one path kept by hand (grep's, for the lean path) must be the spec's."""
    import ast

    import fsmem.memory

    tree = ast.parse(Path(fsmem.memory.__file__).read_text())
    memory = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Memory")
    block = next(n for n in memory.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {target.id for n in block.body if isinstance(n, ast.Assign) for target in n.targets}
    assert set(declared()) <= typed, set(declared()) - typed
    kept = {
        target.id: ast.literal_eval(n.value.args[0])
        for n in block.orelse
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        for target in n.targets
    }
    assert {name: kept[name] for name in kept if name in declared()} == {"grep": declared()["grep"].function}
    assert set(kept) - set(declared()) == {"files", "meta", "superseded_ranges", "watch", "sync"}
