"""Commands without click (`fsmem.cli.lean`): the same answer, errors and exit code as the click command,
and the import budget of the commands agents call most, checked by the modules a run loads (never by time)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem
from conftest import write_file

from fsmem.agents import tools
from fsmem.cli import generated, lean, main
from fsmem.spec import declared


def run(argv, capsys, *, use_click):
    """stdout, stderr and the exit code of `fsmem ARGV`, through click's command or the lean one."""
    from fsmem.cli.app import run as click_run

    with pytest.raises(SystemExit) as done:
        if use_click:
            click_run(argv)
        else:
            parsed = lean.parse(argv)
            assert parsed is not None, argv
            lean.run(parsed)
    out, err = capsys.readouterr()
    return out, err, done.value.code


@pytest.fixture
def memory(empty_memory):
    root = empty_memory.root
    write_file(
        root,
        "topics/billing.md",
        "---\ntitle: Billing\ntags: [money]\n---\n# Billing\n\n- plan: gold\n- the zephyr plan\n",
    )
    write_file(
        root,
        "entities/acme.md",
        "---\ntitle: Acme\ntype: entity\n---\n- Acme asked about the \x1b[31mzephyr\x1b[0m plan\n",
    )
    return empty_memory


PLAIN = [
    ["grep", "zephyr"],
    ["grep", "zephyr", "--json"],
    ["grep", "-i", "ZEPHYR", "topics"],
    ["grep", "--fixed-strings", "plan:", "--max-results", "1"],
    ["grep", "-w", "plan", "-C", "1", "--offset", "1"],
    ["grep", "zephyr", "--tag", "money", "--tag", "other", "--json"],
    ["grep", "zephyr", "--type=entity", "--max-tokens", "40"],
    ["grep", "- plan:", "--include-superseded", "--as-of", "2030-01-01"],
    ["grep", "nothing-like-this"],
    ["grep", "-i", "--word", "-F", "ZEPHYR", "-C", "2"],  # rg started early (fsmem.cli.early) with every flag
    ["grep", "(", "--json"],  # an error, with its JSON document
    ["grep", "zephyr", "missing/folder"],
    ["grep", "zephyr", "--as-of", "not a date", "--json"],
    ["grep", "zephyr", "--updated-after", "2020-01-01", "--max-results", "0"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_grep_answers_as_the_click_command_does(memory, capsys, argv):
    argv = ["--root", str(memory.root), *argv]
    assert run(argv, capsys, use_click=False) == run(argv, capsys, use_click=True)


def test_the_root_and_agent_come_from_either_side_of_the_command_and_the_environment(memory, capsys, monkeypatch):
    after = ["grep", "zephyr", "--root", str(memory.root), "--agent", "bot"]
    assert run(after, capsys, use_click=False) == run(after, capsys, use_click=True)
    monkeypatch.setenv("FSMEM_ROOT", str(memory.root))
    assert lean.parse(["grep", "x"]).root == str(memory.root)
    assert run(["grep", "zephyr"], capsys, use_click=False) == run(["grep", "zephyr"], capsys, use_click=True)
    monkeypatch.setenv("FSMEM_ROOT", "")  # click reads an empty variable as unset
    assert lean.parse(["grep", "x"]).root is None


@pytest.mark.parametrize(
    "argv",
    [
        ["grep", "--help"],
        ["grep"],  # missing PATTERN
        ["grep", "x", "--max-result", "3"],  # a typo: click suggests the option
        ["grep", "-iw", "x"],
        ["grep", "--", "-x"],
        ["grep", "x", "--offset", "-1"],
        ["grep", "x", "--offset", "two"],
        ["grep", "x", "--json=yes"],
        ["grep", "x", "--type"],
        ["--version", "grep"],
        ["ls", "grep", "x"],  # an extra operand
        ["--root", "--agent", "grep", "x"],
    ],
    ids=" ".join,
)
def test_anything_else_is_left_to_click(argv):
    assert lean.parse(argv) is None


def test_a_line_left_to_click_gets_clicks_answer(memory, capsys):
    argv = ["--root", str(memory.root), "grep", "x", "--max-result", "3"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert "No such option '--max-result'. Did you mean '--max-results'?" in capsys.readouterr().err


HUGE = 10**30
BEYOND = [  # a command line, the tool call of the same, the argument as each face names it
    (["grep", "zephyr", "--offset", str(HUGE)], ("grep", {"pattern": "zephyr", "offset": HUGE}), "offset"),
    (["ls", "--max-results", str(HUGE)], ("ls", {"max_results": HUGE}), "max-results"),
    (["search", "plan", "--max-results", str(HUGE)], ("search", {"query": "plan", "max_results": HUGE}), "max-results"),
]


@pytest.mark.parametrize(("argv", "call", "name"), BEYOND, ids=[" ".join(argv[:2]) for argv, _, _ in BEYOND])
def test_a_number_beyond_2_to_the_63_is_named_as_the_face_spells_it(memory, capsys, argv, call, name):
    """Not as the Python method's (`Memory.grep(): offset must be a whole number, not a whole number beyond ...`,
    to one who gave a whole number): by the lean parse and click's alike, and by the agent tools."""
    argv = ["--root", str(memory.root), *argv]
    wanted = ("", f"fsmem: error: --{name} must be within ±2**63, not 1e+30\n", 2)
    assert run(argv, capsys, use_click=False) == wanted
    assert run(argv, capsys, use_click=True) == wanted
    answer = tools.call(memory, *call)
    assert answer.is_error
    assert answer.text == f"error: argument '{name.replace('-', '_')}' must be within ±2**63, not 1e+30"


# a value of each parameter, for a line with every option of a command (anything not named here: by its kind)
SAMPLES = {
    **{"path": "topics/billing.md", "source": "topics/billing.md", "target": "topics/b.md", "subject": "acme"},
    **{"pattern": "zephyr", "query": "zephyr plan", "key": "plan", "section": "Billing", "lines": "1:3"},
    **{"as_of": "2030-01-01", "updated_after": "2020-01-01", "since": "2020-01-01", "type": "entity"},
    **{"at": "HEAD", "rev": "HEAD", "old": "gold", "new": "silver", "tag": "money", "command": "true"},
    **{"text": "- plan: platinum", "session": "s1", "set": "title=Billing 2", "seen": "missing-file"},
}
BY_KIND = {"str": "x", "int": "2", "float": "0.5", "list": "x", "dict": "x=1"}


def every_line() -> list[list[str]]:
    """For each command the lean path parses: its operands and required options, then with every option once."""
    from fsmem.cli.running import command_lines

    spellings, _, options_of, operands_of, _, _ = command_lines(declared().values())
    lines = []
    for command, options in options_of.items():
        operands = [SAMPLES.get(name, BY_KIND[kind]) for name, kind, _ in operands_of[command]]
        words, required = {}, []
        for name in options.split():
            flag = name.rstrip("!")
            parameter, kind = spellings[flag]
            words[parameter] = [flag] if kind == "bool" else [flag, SAMPLES.get(parameter, BY_KIND[kind])]
            required += words[parameter] if name.endswith("!") else []
        lines.append([command, *operands, *required])
        lines.append([command, *operands, *(word for pair in words.values() for word in pair)])
    return lines


@pytest.mark.parametrize("argv", [*every_line(), ["note", "-"], ["grep", "-"], ["read", "-"]], ids=" ".join)
def test_every_command_the_lean_path_parses_answers_as_the_click_command_does(
    memory, capsys, argv, tmp_path, monkeypatch
):
    """Each side runs on the same memory as it was (a write is undone between them): the same stdout, stderr
    and exit code, whatever the command does. The clock is pinned: a write stamps `updated:` to the second,
    and its answer names the file's version, so two sides a second apart answered differently (an `edit`,
    once)."""
    monkeypatch.setenv("FSMEM_NOW", "2026-03-01T10:00:00+00:00")
    argv = ["--root", str(memory.root), *argv]
    kept = tmp_path / "kept"
    shutil.copytree(memory.root, kept, symlinks=True)
    lean_side = run(argv, capsys, use_click=False)
    shutil.rmtree(memory.root)
    shutil.copytree(kept, memory.root, symlinks=True)
    assert lean_side == run(argv, capsys, use_click=True)


def test_every_operation_but_a_groups_subcommand_is_parsed_here():
    """Every declared operation's command line is the lean path's, its inputs' adapters included (`note -`
    reads stdin, `write --set` parses YAML, `consolidate` shows a progress bar); `import markdown`, a group's
    subcommand, is click's; and so is a line that is not plain."""
    from fsmem.cli.running import command_lines

    parsed_here = command_lines(declared().values())[2]
    assert sorted(parsed_here) == sorted(name for name, op in declared().items() if op.cli.group is None)
    for argv in (["import", "markdown", "x"], ["ls", "a", "b"], ["read"], ["write"]):
        assert lean.parse(argv) is None, argv
    assert lean.parse(["note", "- employer: Globex", "--session", "s1"]).arguments["session"] == "s1"


def test_the_lean_tables_are_made_from_the_spec():
    """grep's lean tables are source written from its spec, never by hand: a parameter added to grep fails here
    until `python -m fsmem.cli.generated` rewrites them (and then parses as click does); no other operation
    has any, so a new operation touches no written file."""
    from fsmem.cli import lean_tables

    text = Path(lean_tables.__file__).read_text(encoding="utf-8")
    written = generated.LEAN_BEGIN + text.split(generated.LEAN_BEGIN, 1)[1].split(generated.LEAN_END, 1)[0]
    assert written + generated.LEAN_END == generated.lean_tables(), "run: python -m fsmem.cli.generated"


def test_the_tables_are_rewritten_from_the_spec(tmp_path):
    from fsmem.cli import lean_tables

    copy = tmp_path / "lean_tables.py"
    text = Path(lean_tables.__file__).read_text(encoding="utf-8")
    copy.write_text(text.replace('"-i": ("ignore_case", "bool")', '"-x": ("ignore_case", "bool")'), encoding="utf-8")
    assert generated.write_lean_tables(str(copy))
    assert copy.read_text(encoding="utf-8") == text
    assert not generated.write_lean_tables(str(copy))


# -- the import budget: what each command loads (docs/performance.md) ----------------------------------------
PROBE = """
import sys
from fsmem.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("MODULES:" + " ".join(sorted(sys.modules)), file=sys.stderr)
"""
# never loaded by the command, whatever the memory holds (a warm cache)
HEAVY = ["yaml", "tiktoken", "rapidfuzz", "watchdog", "mcp", "numpy", "fsmem.consolidate", "fsmem.history"]
NOT_LOADED = {
    "grep": [
        *HEAVY,
        *("click", "fsmem.spec", "fsmem.search", "fsmem.query.links", "fsmem.query.listing", "secrets"),
        # no file is parsed (a warm cache), and a version's SHA-1 needs no OpenSSL (fsmem.store.files._sha1)
        *("fsmem.format.frontmatter", "fsmem.format.markdown", "fsmem.format.links", "fsmem.format.secrets"),
        *("hashlib", "_hashlib", "datetime"),
    ],
    "ls": [*HEAVY, "click", "fsmem.search", "fsmem.query.links", "fsmem.operations.writes", "fsmem.operations.upkeep"],
    "read": [
        *HEAVY,
        "click",
        "fsmem.search",
        "fsmem.query.listing",
        "fsmem.operations.writes",
        "fsmem.operations.upkeep",
    ],
    # a note writes front matter (yaml) and brings the search index up to date with it, when there is one
    "note": [
        *("click", "tiktoken", "rapidfuzz", "watchdog", "mcp", "numpy", "fsmem.consolidate"),
        "fsmem.operations.upkeep",
    ],
}


def loaded(root, *argv):
    env = without_fsmem()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--root", str(root), *argv], capture_output=True, text=True, env=env, timeout=60
    )
    return done.stderr.rsplit("MODULES:", 1)[-1].split()


def test_the_commands_agents_call_most_import_only_what_they_use(memory):
    past = (memory.root / "fsmem.yaml").stat().st_mtime - 10
    for path in memory.root.rglob("*"):  # older than a second, as in any memory: their parsed copies are kept
        if path.is_file() and ".fsmem" not in path.parts:
            os.utime(path, (past, past))
    loaded(memory.root, "ls")  # a warm metadata cache and that copy, as after the memory's first command
    for command, argv in {
        "grep": ["grep", "zephyr"],
        "ls": ["ls", "--max-results", "5"],
        "read": ["read", "topics/billing.md"],
        "note": ["note", "the import budget test wrote this"],
    }.items():
        modules = loaded(memory.root, *argv)
        assert "fsmem.memory" in modules, command  # the command ran
        wrong = [m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_LOADED[command])]
        assert not wrong, f"fsmem {command} imported {wrong}"


# Every fsmem module a plain grep imports (a warm cache, matches in two files): one more is a decision, made here.
# fsmem.store.beneath: the retrieval log a grep appends to lives in .fsmem/, whose folders are opened through no
# link (issue 31). fsmem.cli.rendezvous: the memory a grep opens is a kept one in a process that answers one-shot
# reads (from the shell it is imported before, to ask one). fsmem.state_files: the retrieval log is opened as a
# regular file only, never a FIFO or a link (os, stat and errno: nothing more imported). fsmem.store.selection: the
# answer names the files too large to search, which the catalog's last walk knows.
GREP_MODULES = """fsmem fsmem.arguments fsmem.budget fsmem.cli fsmem.cli.early fsmem.cli.lean fsmem.cli.lean_tables
fsmem.cli.printing fsmem.cli.rendezvous fsmem.cli.running fsmem.config fsmem.config.check fsmem.config.parse fsmem.config.sections fsmem.errors fsmem.faces fsmem.format
fsmem.format.portable fsmem.memory fsmem.names fsmem.operations fsmem.operations.core
fsmem.operations.reads fsmem.query fsmem.query.grep fsmem.query.grep_cache fsmem.state_files fsmem.store fsmem.store.beneath
fsmem.store.cache
fsmem.store.catalog fsmem.store.files fsmem.store.host fsmem.store.logs fsmem.store.paths
fsmem.store.rg fsmem.store.rg_command fsmem.store.root fsmem.store.scope fsmem.store.selection
fsmem.store.superseded_lines fsmem.store.template fsmem.store.walk fsmem.tokens""".split()


def test_a_plain_grep_imports_these_fsmem_modules_and_starts_rg_after_only_a_few(memory):
    past = (memory.root / "fsmem.yaml").stat().st_mtime - 10
    for path in memory.root.rglob("*.md"):  # older than a second: their rows need no second look
        os.utime(path, (past, past))
    loaded(memory.root, "ls")
    assert sorted(m for m in loaded(memory.root, "grep", "zephyr") if m.split(".")[0] == "fsmem") == GREP_MODULES
    # rg starts once fsmem.cli.lean and fsmem.cli.early are in (fsmem.cli.main): nothing more is imported first
    probe = (
        "import sys; before = set(sys.modules); from fsmem.cli import early, lean; print(*set(sys.modules) - before)"
    )
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(m for m in first if m.split(".")[0] == "fsmem") == [
        "fsmem",
        "fsmem.cli",
        "fsmem.cli.early",
        "fsmem.cli.lean",
        "fsmem.cli.lean_tables",
        "fsmem.errors",
        "fsmem.names",
        "fsmem.store",
        "fsmem.store.rg_command",
    ]
    assert not {"typing", "pathlib", "dataclasses", "json"} & set(first)


@pytest.mark.parametrize(
    "argv", [["grep", "zephyr"], ["grep", "zephyr", "--json"], ["grep", "(", "--json"]], ids=" ".join
)
def test_a_grep_that_is_the_whole_process_answers_as_the_click_command_does(memory, capsys, argv):
    """`fsmem grep` from the shell leaves the collector out of its imports and its exit (`fsmem.cli.lean._settled`):
    the same bytes, and its memory closed (no WAL left beside the cache)."""
    argv = ["--root", str(memory.root), *argv]
    env = without_fsmem()
    done = subprocess.run([sys.executable, "-m", "fsmem", *argv], capture_output=True, text=True, env=env, timeout=60)
    assert not [p.name for p in (memory.root / ".fsmem").glob("cache.sqlite-*")]
    assert (done.stdout, done.stderr, done.returncode) == run(argv, capsys, use_click=True)
