"""The command line and the environment as an attacker or a careless script sends them.

The defects found on this surface each have a test here (what the input did before, what it does now), and
one property draws whole command lines from the spec itself (`fsmem.spec.declared`, `fsmem.spec.commands`), so
that a new operation or option is fuzzed without an edit here: a command, hostile values for its options and
arguments, and FSMEM_* variables, run through the CLI in this process (tests/cli_runner.py) on a small memory.
"""

from __future__ import annotations

import json
import os
import re
import time

import cli_runner
import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.agents import tools
from fsmem.cli.printing import visible
from fsmem.errors import InvalidArgument

NOW = "2026-12-07T12:00:00Z"


def _memory(root) -> Memory:
    Memory.init(root)
    memory = Memory(root)
    memory.write("topics/a.md", body="# A\n\n- owner: Ann\n", set={"type": "semantic"})
    return memory


def _env(**variables: str) -> dict[str, str]:
    return {**without_fsmem(), "FSMEM_NOW": NOW, "FSMEM_SOCKET": "off", **variables}


def _fsmem(root, *args: str, **variables: str):
    return cli_runner.run(["--root", str(root), *args], env=_env(**variables), text=True)


# -- --type: a choice of the spec, refused alike on every face ----------------------------------------------------


def test_a_type_no_file_can_have_is_refused_by_every_command_that_filters_by_type(tmp_path):
    """`fsmem ls --type bogus` answered "(no memory files match)" with exit 1, as if the memory held no such
    file: a typo (`--type semantics`) looked like an empty memory. The types are the spec's choices now."""
    _memory(tmp_path)
    for command in (["ls"], ["grep", "owner"], ["search", "owner"]):
        done = _fsmem(tmp_path, *command, "--type", "semantics")
        assert (done.returncode, done.stdout) == (2, ""), (command, done)
        assert done.stderr == "fsmem: error: --type must be one of semantic, episodic, procedural, not 'semantics'\n"
        assert _fsmem(tmp_path, *command, "--type", "semantic").returncode == 0, command


def test_a_type_no_file_can_have_is_refused_by_the_tools_and_their_schemas_say_so(tmp_path):
    from fsmem.format import MEMORY_TYPES

    memory = _memory(tmp_path)
    for name, arguments in (("ls", {}), ("grep", {"pattern": "owner"}), ("search", {"query": "owner"})):
        answer = tools.call(memory, name, {**arguments, "type": "semantics"})
        assert answer.is_error and "argument 'type' must be one of: semantic, episodic, procedural" in answer.text
        schema = next(t for t in tools.mcp_tools(memory) if t["name"] == name)["inputSchema"]
        assert schema["properties"]["type"]["enum"] == list(MEMORY_TYPES)


# -- FSMEM_* variables: a value that is none is refused, never read as unset ---------------------------------------


def _cold(root):
    """A memory none of whose files any command has read yet: the next one builds its catalog and index."""
    Memory.init(root)
    (root / "topics").mkdir(exist_ok=True)
    (root / "topics" / "a.md").write_text("---\ntitle: A\ntype: semantic\n---\n# A\n\n- owner: Ann\n", encoding="utf-8")


def test_a_progress_delay_that_is_no_number_of_seconds_is_refused(tmp_path):
    """FSMEM_PROGRESS_AFTER=abc (or nan, -1, 0,5) was read as unset, silently: now the build it would time is
    refused as FSMEM_WORKERS=abc is, exit 2 naming the variable, and a later command builds as usual."""
    _cold(tmp_path)
    for value in ("abc", "nan", "-1", "1e309", "0,5", "x" * 10_000):
        done = _fsmem(tmp_path, "search", "owner", FSMEM_PROGRESS_AFTER=value)
        assert (done.returncode, done.stdout) == (2, ""), (value, done)
        assert done.stderr.startswith("fsmem: error: FSMEM_PROGRESS_AFTER is '") and len(done.stderr) < 300
        assert done.stderr.endswith(", not a number of seconds (0 or more)\n"), done.stderr
    done = _fsmem(tmp_path, "search", "owner", FSMEM_PROGRESS_AFTER=" 0.5 ")
    assert done.returncode == 0 and "topics/a.md" in done.stdout, done


def variables_read() -> list[str]:
    """Every FSMEM_* variable fsmem's source names: a new one is tried here without an edit."""
    from pathlib import Path

    import fsmem

    found = set()
    for path in Path(fsmem.__file__).parent.rglob("*.py"):
        found.update(re.findall(r"\bFSMEM_[A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    return sorted(found)


FRONT_VARIABLES = {"FSMEM_SOCKET"}  # read by `fsmem.cli.rendezvous.ask`, which only the script runs


@pytest.mark.parametrize("name", variables_read())
def test_a_long_or_hostile_variable_gets_a_short_clean_answer(tmp_path, name):
    """FSMEM_NOW, FSMEM_WORKERS and FSMEM_SOCKET of 10 kB were echoed whole in their refusal (10 kB of stderr, a
    line as long as the value); every variable's refusal now echoes its start and its size, and no value makes
    a command print a control character, a traceback, or an exit code other than 0, 1 or 2."""
    _cold(tmp_path)
    # what the script's front reads before `main` (the watcher's rendezvous) is asked by a process
    runner = cli_runner.real if name in FRONT_VARIABLES else cli_runner.run
    for value in ("x" * 10_000, "\x1b[31m\x07\r\u202e../x", "-1e309", "9" * 5_000):
        for command in (["search", "owner"], ["note", "hi"]):
            done = runner(["--root", str(tmp_path), *command], env=_env(**{name: value}), text=True)
            assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr, (command, value[:20], done)
            assert len(done.stderr) < 600 and done.stderr.count("\n") <= 3, (command, value[:20], done.stderr[:300])
            assert visible(done.stderr + done.stdout) == done.stderr + done.stdout, (command, done)
            assert "ValueError" not in done.stderr, (command, value[:20], done.stderr[:300])


def test_a_host_id_no_note_name_may_hold_is_refused_where_it_was_chosen(tmp_path):
    """FSMEM_HOST_ID=../x was refused only as "session id 'default-../x'" of each note, naming an id the user
    never gave; `fsmem config --local notes.host_id ../x` was taken, and every later note failed so. Now the
    variable is named, the setting is refused when set, and nothing is written."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    done = _fsmem(tmp_path, "note", "- owner: Bo", FSMEM_HOST_ID="../x")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "fsmem: error: FSMEM_HOST_ID is '../x'; a host id may hold only letters, digits, '.', '_' and '-' "
        "(at most 64 characters)\n"
    )
    done = _fsmem(tmp_path, "config", "--local", "notes.host_id", "../x")
    assert (done.returncode, done.stdout) == (2, "")
    assert "notes.host_id may hold only letters, digits" in done.stderr
    assert _bytes(tmp_path) == before
    assert _fsmem(tmp_path, "note", "- owner: Bo", FSMEM_HOST_ID="laptop.2").returncode == 0


def test_an_agent_name_no_note_name_may_hold_is_named_as_the_agent(tmp_path):
    """`fsmem --agent ../x note hi` (or FSMEM_AGENT=../x) said "session id '../x-1a2b3c4d' may hold only...": an id
    the user never gave. The agent is named now, with the option that names a note instead; nothing is written."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    for option in (["--agent", "../x"], []):
        done = cli_runner.run(
            ["--root", str(tmp_path), *option, "note", "- owner: Bo"],
            env=_env(**({} if option else {"FSMEM_AGENT": "../x"})),
            text=True,
        )
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr == (
            "fsmem: error: the agent '../x' cannot name a session note, whose name may hold only letters, digits, "
            "'.', '_' and '-'; name the note with --session\n"
        )
    assert _bytes(tmp_path) == before
    memory = Memory(tmp_path, agent="../x")
    answer = tools.call(memory, "note", {"text": "- owner: Bo"})
    assert answer.is_error and answer.text.endswith("may hold only letters, digits, '.', '_' and '-'"), answer.text
    assert _fsmem(tmp_path, "--agent", "../x", "note", "- owner: Bo", "--session", "s2").returncode == 0


def test_an_agent_name_too_long_for_a_note_name_says_so(tmp_path):
    """An agent of letters alone, too long to name a note beside the host's id, was told its name "may hold only
    letters, digits, '.', '_' and '-'", which it did: the message names the length, counted as fsmem counts it."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    done = _fsmem(tmp_path, "--agent", "a" * 300, "note", "- owner: Bo", FSMEM_HOST_ID="laptop.2")
    assert (done.returncode, done.stdout) == (2, ""), done
    room = 100 - len("-laptop.2")
    assert f"(300 characters) is longer than the {room} characters a session note's name leaves" in done.stderr
    assert _bytes(tmp_path) == before
    assert _fsmem(tmp_path, "--agent", "a" * room, "note", "- owner: Bo", FSMEM_HOST_ID="laptop.2").returncode == 0


def test_a_folder_moved_into_itself_is_refused_in_words(tmp_path):
    """`fsmem mv topics topics/sub` said "invalid argument ('topics')", the rename's EINVAL; nothing moved."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    done = _fsmem(tmp_path, "mv", "topics", "topics/sub")
    assert (done.returncode, done.stderr) == (
        2,
        "fsmem: error: cannot move the folder 'topics' into itself ('topics/sub')\n",
    )
    assert _bytes(tmp_path) == before


def _bytes(root) -> dict[str, bytes]:
    """Every file under the memory's root, `.git/` and `.fsmem/` included, by its path."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_a_number_that_is_not_finite_is_refused_in_the_words_of_the_command_line(tmp_path):
    """`fsmem search x --min-score nan` said "Memory.search(): min_score must be a number or None, not float nan":
    the Python API's words, to a user who typed an option. Now the option, as typed."""
    _memory(tmp_path)
    for value in ("nan", "inf", "-inf", "1e309"):
        done = _fsmem(tmp_path, "search", "owner", "--min-score", value)
        shown = {"1e309": "inf"}.get(value, value)
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr == f"fsmem: error: --min-score must be a finite number, not {shown}\n"
    done = _fsmem(tmp_path, "distill", "--command", "true", "--timeout", "nan")
    assert done.stderr == "fsmem: error: --timeout must be a finite number, not nan\n" and done.returncode == 2


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_time_that_is_no_time_in_utc_is_refused_as_no_date(tmp_path, value):
    """A time whose UTC is before year 1 or after 9999 parsed, then raised OverflowError where it was converted:
    `--as-of` of read, grep, search and context, and FSMEM_NOW of a note, said "OverflowError: date value out of
    range". It is no date now, refused as any other, and nothing is written."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    for line, variables in (
        (["search", "owner", "--as-of", value], {}),
        (["grep", "owner", "--as-of", value], {}),
        (["read", "topics/a.md", "--as-of", value], {}),
        (["context", "--as-of", value], {}),
        (["note", "- owner: Bo"], {"FSMEM_NOW": value}),
    ):
        done = _fsmem(tmp_path, *line, **variables)
        assert (done.returncode, done.stdout) == (2, ""), (line, done)
        assert not LEAKED.search(done.stderr) and repr(value) in done.stderr, (line, done.stderr)
    after = _bytes(tmp_path)
    assert {p for p in {*before, *after} if before.get(p) != after.get(p) and not p.startswith(".fsmem/")} == set()


def test_an_option_of_another_format_is_named_as_typed(tmp_path):
    """`fsmem import chatgpt FILE --into x` said "into is for markdown", the Python name of --into."""
    memory = _memory(tmp_path)
    export = tmp_path.parent / f"{tmp_path.name}-conversations.json"
    export.write_text("[]", encoding="utf-8")
    done = _fsmem(tmp_path, "import", "chatgpt", str(export), "--into", "topics/x")
    assert (done.returncode, done.stderr) == (
        2,
        "fsmem: error: --into is for markdown: conversations always go to sessions/\n",
    )
    with pytest.raises(InvalidArgument, match="^into is for markdown"):
        memory.import_from("chatgpt", str(export), into="topics/x")


def test_a_timeout_or_folder_that_is_none_is_named_where_it_was_given(tmp_path):
    """`fsmem distill --timeout -5` said "timeout takes a number of seconds...", and so did a bad
    `distill.timeout` setting, which `fsmem config --local distill.timeout abc` took without a word; `import
    markdown DIR --into /` said "into must name a folder". Each names the option or the setting now, and the
    setting is refused when set."""
    from fsmem.history import host_settings
    from fsmem.operations import command

    assert host_settings.MAX_TIMEOUT == command.MAX_TIMEOUT  # the setting's most is the option's
    _memory(tmp_path)
    notes = tmp_path.parent / f"{tmp_path.name}-notes"
    notes.mkdir()
    (notes / "n.md").write_text("# N\n", encoding="utf-8")
    says = "takes a number of seconds above 0 and at most 3600\n"
    for line, expected in (
        (["distill", "--command", "true", "--timeout", "-5"], f"fsmem: error: --timeout {says}"),
        (["config", "--local", "distill.timeout", "abc"], f"fsmem: error: distill.timeout {says}"),
        (["import", "markdown", str(notes), "--into", "/"], "fsmem: error: --into must name a folder of the memory"),
    ):
        done = _fsmem(tmp_path, *line)
        assert done.returncode == 2 and done.stderr.startswith(expected), (line, done.stderr)


# -- the fuzzer: any command of the spec, any values, any variables ------------------------------------------------
# about 5 s in `make test`; `make fuzz` (FSMEM_FUZZ_SCALE) multiplies it, HYPOTHESIS_PROFILE=explore draws new ones
EXAMPLES = 20 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
# commands that run until stopped, or reach past the host (a remote, a client's stdio): not for an in-process run
NOT_DRAWN = {"watch", "serve", "mcp", "sync"}
# test hooks that end or hold the process on purpose (fsmem.store.kill_points, fsmem.consolidate.batch_writes)
KILLERS = {"FSMEM_BUILD_KILL_AT", "FSMEM_PAUSE_AT", "FSMEM_CONSOLIDATE_KILL_AFTER"}
# what a command may print at most: the tool definitions are the longest answer (17 kB), a --help 4 kB
STDOUT_BYTES = 64_000
STDERR_BYTES, STDERR_LINES = 1_000, 6
# the exit codes a command may give besides 0, 1 and 2 (their spec's `Cli.exits`; consolidate's 75: another runs)
OTHER_EXITS = {"consolidate": {3, 75}, "distill": {3}}

# an exception no check worded, printed by the CLI's boundary by its class name (`fsmem: error: ValueError: ...`)
LEAKED = re.compile(r"error: [A-Za-z]*(Error|Exception|Warning)\b")
# texts an attacker or a careless script types, with {out} an absolute path outside the memory
HOSTILE = (
    "",
    " ",
    "-",
    "--",
    "-x",
    "..",
    "../x",
    "../../y.md",
    ".",
    "./topics/a.md",
    "topics/../../x.md",
    "{out}",
    "{out}/secret.md",
    ".git/config",
    ".git",
    ".fsmem/cache.sqlite",
    ".fsmem",
    "fsmem.yaml",
    "INDEX.md",
    "topics/a.md",
    "topics",
    "topics/new.md",
    "people/Ann",
    "HEAD",
    "HEAD~1",
    "owner",
    "a=b",
    "type=semantic",
    "tags=[x, y]",
    "=x",
    "x" * 10_000,
    "- owner: " + "y" * 10_000,
    "\x1b[31mred\x1b[0m",
    "a\rb\x07\x08",
    "\u202eevil\u2066",
    "\u200b",
    "\udce9\udcff",  # bytes that are not UTF-8, as Python decodes an argv
    "é/ü.md",
    "*",
    "[",
    "(a",
    "\\",
    "a\nb",
    "~",
    "$HOME",
    "`id`",
    "nan",
    "inf",
    "-inf",
    "-0",
    "0",
    "1",
    "-1",
    "1e309",
    "0x10",
    "9" * 30,
    str(2**63),
    str(-(2**63) - 1),
    "٣",
    "1:3",
    "3:1",
    "0:",
    "-5:",
    "2026-12-07",
    "2026-13-45",
    "9999-12-31T23:59:59Z",
    "0001-01-01",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
)
_TEXT = st.sampled_from(HOSTILE) | st.text(
    alphabet=st.sampled_from("ab-./:=\x1b\r\u202e\udce9é 0123456789"), max_size=12
)
_NUMBER_TEXT = st.sampled_from(
    ("0", "1", "-1", "-0", "2", "64", "nan", "inf", "1e309", "-1e309", "9" * 30, str(2**63), "1.5", "", "x")
) | st.integers(min_value=-(2**70), max_value=2**70).map(str)


def python_words() -> re.Pattern[str]:
    """What only Python and the tools say: `Memory.` and a parameter's name with an underscore (`as_of`), which the
    command line spells `--as-of`."""
    from fsmem.spec import declared

    names = sorted({p.name for op in declared().values() for p in op.params if "_" in p.name})
    return re.compile(rf"\bMemory\.|(?<![\w'-])({'|'.join(names)})(?![\w'-])")


def drawn_commands() -> list[str]:
    """Every command of the spec (a group's subcommands each), but those that run until stopped."""
    from fsmem.spec import declared
    from fsmem.spec.commands import HAND_WRITTEN

    found = [op.name for op in declared().values() if op.cli.group is None]
    found += [f"{op.cli.group} {value}" for op in declared().values() if op.cli.group for value in op.cli.values]
    return sorted({*found, *HAND_WRITTEN} - NOT_DRAWN)


def _click_command(words: list[str]):
    import click

    from fsmem.cli.app import cli

    command = cli
    for word in words:
        command = command.get_command(click.Context(command), word)
    return command


@st.composite
def command_lines(draw) -> list[str]:
    """A command of the spec with drawn values for its options and arguments: some repeated, some unknown."""
    import click

    words = draw(st.sampled_from(drawn_commands())).split()
    command = _click_command(words)
    if isinstance(command, click.Group):
        words.append(draw(st.sampled_from(sorted(command.list_commands(click.Context(command))))))
        command = command.get_command(click.Context(command), words[-1])
    options = [p for p in command.params if isinstance(p, click.Option) and p.name not in ("root",)]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    line = list(words)
    for option in draw(st.lists(st.sampled_from(options), max_size=5)) if options else []:
        flag = draw(st.sampled_from(option.opts))
        if option.is_flag:
            line.append(flag)
            continue
        if isinstance(option.type, click.Choice):
            value = draw(st.sampled_from([*option.type.choices, "bogus"]))
        elif isinstance(option.type, (click.types.IntParamType, click.types.FloatParamType)):
            value = draw(_NUMBER_TEXT)
        else:
            value = draw(_TEXT)
        line.extend([f"{flag}={value}"] if draw(st.booleans()) and flag.startswith("--") else [flag, value])
    for argument in arguments:
        count = draw(st.integers(0, 3)) if argument.nargs == -1 else draw(st.sampled_from((1, 1, 1, 0)))
        line.extend(draw(_TEXT) for _ in range(count))
    if draw(st.integers(0, 9)) == 0:
        line.insert(draw(st.integers(1, len(line))), draw(st.sampled_from(("--bogus", "-Z", "--json", "--help"))))
    return line


@st.composite
def variables(draw) -> dict[str, str]:
    """FSMEM_* variables as a careless shell leaves them: each one fsmem reads, now and then, given a drawn text."""
    names = [name for name in variables_read() if name not in KILLERS and name != "FSMEM_SOCKET"]
    chosen = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    return {name: draw(_TEXT | _NUMBER_TEXT) for name in chosen}


def _fuzz_base(factory):
    """A small memory with a history (a few files, a note, a commit), made once and copied for each example."""
    if "base" not in _BASE:
        root = factory.mktemp("clifuzz-base") / "mem"
        Memory.init(root, git=True)
        memory = Memory(root)
        memory.write("topics/a.md", body="# A\n\nSee [[people/Ann]].\n\n- owner: Ann\n", set={"type": "semantic"})
        memory.write("entities/people/ann.md", body="# Ann\n\n- employer: Globex\n", set={"title": "Ann"})
        memory.note("- employer: Initech", subject="people/Ann", session="s1")
        _BASE["base"] = root
    return _BASE["base"]


_BASE: dict[str, object] = {}


def _staged(root) -> str:
    """What the index holds (`git ls-files --stage`), without the stat cache git keeps beside it."""
    import subprocess

    return subprocess.run(["git", "ls-files", "--stage"], cwd=root, capture_output=True, text=True, check=True).stdout


def _read_only(words: list[str]) -> bool:
    from fsmem.spec import declared

    op = declared().get(words[0])
    return (op is not None and op.read_only) or words[0] == "tools"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=command_lines(),
    env=variables(),
    stdin=st.sampled_from(("", "- owner: Bo\n", "x" * 10_000)),
    by_root=st.booleans(),
)
def test_no_command_line_or_variable_gets_a_traceback_a_flood_or_a_change_it_should_not(
    tmp_path_factory, line, env, stdin, by_root
):
    """Any command of the spec, with hostile option and argument values (nan, 1e309, 2**63, empty, 10 kB, controls,
    bidi, bytes that are not UTF-8, `..`, absolute paths, repeated and unknown options) and hostile FSMEM_*
    variables: the exit code is 0, 1, 2 (or the command's own), stderr a few clean lines with no traceback,
    stdout bounded and clean; a read-only command changes no byte of the memory (its .git/ and fsmem.yaml
    included; .fsmem/ is its cache), and nothing outside the memory is touched but by a command whose job that is."""
    import shutil

    place = tmp_path_factory.mktemp("clifuzz")
    root, out = place / "w" / "mem", place / "outside"
    shutil.copytree(_fuzz_base(tmp_path_factory), root, symlinks=True)
    out.mkdir()
    (out / "secret.md").write_text("---\ntitle: Secret\n---\n# Secret\n\n- key: hunter2\n", encoding="utf-8")
    (place / "home").mkdir()
    argv = [word.replace("{out}", str(out)) for word in line]
    given = {name: value.replace("{out}", str(out)) for name, value in env.items()}
    home = {"HOME": str(place / "home"), "XDG_CONFIG_HOME": str(place / "home" / ".config")}
    before, outside = _bytes(root), _bytes(out)
    where = ["--root", str(root)] if by_root else []  # else the folder it runs in, or FSMEM_ROOT if drawn
    done = cli_runner.run([*where, *argv], cwd=root, env={**_env(**home), **given}, input=stdin)
    stdout = done.stdout.decode("utf-8", "surrogateescape")
    stderr = done.stderr.decode("utf-8", "surrogateescape")
    shown = ([w[:80] for w in argv], {k: v[:40] for k, v in given.items()}, done.returncode, stderr[:600], stdout[:300])
    assert done.returncode in {0, 1, 2} | OTHER_EXITS.get(argv[0], set()), shown
    assert "Traceback" not in stderr and not LEAKED.search(stderr), shown
    assert not python_words().search(stderr), shown  # the CLI's words: --as-of, not as_of or Memory.read()
    assert len(done.stderr) <= STDERR_BYTES and stderr.count("\n") <= STDERR_LINES, shown
    assert len(done.stdout) <= STDOUT_BYTES, shown
    assert visible(stderr) == stderr and visible(stdout) == stdout, shown
    if "--json" in argv and "--help" not in argv and "--" not in argv and stdout.strip():
        json.loads(stdout)  # an answer, or the error as {"error": ...}: a document a caller can parse
    if _read_only(argv):
        after = _bytes(root)
        changed = {path for path in {*before, *after} if before.get(path) != after.get(path)}
        if ".git/index" in changed and _staged(root) == _staged(_fuzz_base(tmp_path_factory)):
            changed.discard(".git/index")  # git's stat cache, which a read refreshes (the copy moved every stamp)
        assert {path for path in changed if not path.startswith(".fsmem/")} == set(), shown
    if argv[0] not in ("connect", "token", "evaluate", "init", "import"):
        assert _bytes(out) == outside, shown


# -- an error repeats what was typed, cut ---------------------------------------------------------------------------
LONG = "x" * 10_000
ECHOING = [
    [LONG],
    ["ls", f"--{LONG}"],
    ["ls", "--depth", LONG],
    ["ls", "--type", LONG],
    ["tools", "--format", LONG],
    ["connect", LONG],
    ["connect", "claude-code", "--scope", LONG],
    ["agent", "add", LONG],
    ["config", "--local", LONG],
    ["token", "revoke", LONG],
    ["hook", LONG],
    ["hook", "claude-code", LONG],
    ["import", LONG],
    ["serve", "--memory", LONG],
    ["read", "topics/a.md", "--lines", " ".join([LONG[:50]] * 200)],
]


@pytest.mark.parametrize("line", ECHOING, ids=lambda line: " ".join(word[:12] for word in line))
def test_an_error_repeats_a_long_value_cut_with_its_size(tmp_path, line):
    """A 10 kB value typed where a name, a choice, a number or an option goes came back whole in the error
    (`agent add`, `connect`, `tools --format`, an unknown command or option, `ls --depth`: 10 kB of stderr, on
    one line); the CLI's one error boundary now cuts what it repeats, as `echo` does, to its start and its size."""
    _memory(tmp_path)
    home = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}
    done = cli_runner.run(["--root", str(tmp_path), *line], env=_env(**home), text=True)
    assert done.returncode == 2, done
    assert len(done.stderr) < 1_000 and "characters)" in done.stderr, done.stderr[:300]
    with_json = cli_runner.run(["--root", str(tmp_path), *line, "--json"], env=_env(**home), text=True)
    assert len(with_json.stdout) < 1_000 and len(with_json.stderr) < 1_000, with_json.stdout[:300]


# -- a running watcher whose .fsmem/ is deleted ----------------------------------------------------------------------


def test_a_watcher_whose_state_folder_is_deleted_listens_again_and_answers_as_the_walk(tmp_path):
    """`rm -rf .fsmem/` (safe, the docs say) under a running `fsmem watch` took its socket, and the watcher went
    on listening where no command could ask: every command walked, unsaid (FSMEM_SOCKET=require failed). It now
    notices within its poll, makes its socket again, says so, and answers what the walk answers."""
    import shutil

    from test_rendezvous import Watcher, both, run as asked, zephyr_memory

    memory = zephyr_memory(tmp_path)
    watcher = Watcher(memory.root)
    try:
        path = watcher.socket()
        for removed in (memory.root / ".fsmem", memory.root / ".fsmem" / "run"):
            shutil.rmtree(removed)
            watcher.wait_for("was removed (.fsmem/ deleted?); listening again")
            deadline = time.monotonic() + 30
            while not os.path.exists(path) and time.monotonic() < deadline:
                time.sleep(0.05)
            (memory.root / "topics" / f"{removed.name}.md").write_text("# New\n\n- zephyr again\n", encoding="utf-8")
            time.sleep(0.5)  # the watcher's settle time, and more
            both(memory.root, "grep", "zephyr")
            assert asked(memory.root, "ls", mode="require")[0] == 0
            watcher._said.truncate(0)
    finally:
        watcher.stop()
    assert not os.path.lexists(path)


# -- as a process: the bytes of an argv and of the environment as the OS hands them over ----------------------------
AS_A_PROCESS = [
    (["read", "topics/\udcff\udcfe.md"], {}),
    (["grep", "\udcff"], {}),
    (["ls", "--tag", "\udce9\udc80", "--type", "\udcff"], {}),
    (["note", "hi", "--subject", "\udcc3"], {}),
    (["--agent", "\udcff", "note", "hi"], {}),
    (["note", "hi"], {"FSMEM_SESSION": "\udcff"}),
    (["note", "hi"], {"FSMEM_HOST_ID": "../\udcff"}),
    (["ls"], {"FSMEM_SOCKET": "\x1b[2J" + "x" * 10_000}),
    (["search", "owner"], {"FSMEM_NOW": "\udcff", "FSMEM_WORKERS": "9" * 5_000}),
    (["ls", "--" + "x" * 10_000], {}),
]


@pytest.mark.parametrize("line, variables", AS_A_PROCESS, ids=lambda v: repr(v)[:30])
def test_hostile_bytes_in_a_real_argv_and_environment(tmp_path, line, variables):
    """What only a process is given: an argv and variables of bytes that are not UTF-8 (Python hands them over
    as lone surrogates), and FSMEM_SOCKET, read before `main`. Refused in one clean line, nothing written."""
    _memory(tmp_path)
    before = _bytes(tmp_path)
    done = cli_runner.real(["--root", str(tmp_path), *line], env=_env(**variables))
    stderr = done.stderr.decode("utf-8", "surrogateescape")
    assert (done.returncode, done.stdout) == (2, b""), (line, done)
    assert stderr.startswith(("fsmem: error: ", "Usage: ")) and len(stderr) < 600, stderr
    assert "Traceback" not in stderr and visible(stderr) == stderr, stderr
    after = _bytes(tmp_path)
    assert {p for p in {*before, *after} if before.get(p) != after.get(p) and not p.startswith(".fsmem/")} == set()
