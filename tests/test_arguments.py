"""Issue #19, finding 12: the API's promise made exact, where arguments come in.

`read(123)`, `read(lines=5)`, `write(set="t=x")` and `mv(None, …)` raised
TypeError, AttributeError or a YAML RepresenterError, where the README says
only `FsmemError` leaves a `Memory` method. Every public method now checks its
arguments against its annotations (`fsmem.arguments.ArgumentCheck`) and raises
InvalidArgument; hypothesis calls every public method with values of every
type. A fsmem.yaml of the wrong types is a ConfigError naming the setting, its
value and its line; `--set title=&a [*a]` gets a clear message.
"""

from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, event, given, settings, strategies as st

from fsmem import Memory
from fsmem.errors import ConfigError, FsmemError, InvalidArgument
from fsmem.store.scope import Scope

FSMEM = str(Path(sys.executable).with_name("fsmem"))


@pytest.fixture
def memory(tmp_path, monkeypatch) -> Memory:
    monkeypatch.chdir(tmp_path)  # Memory.init("x") below makes ./x here
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:00:00+00:00")
    made = Memory.init(tmp_path / "mem")
    (made.root / "topics").mkdir()
    (made.root / "topics" / "a.md").write_text("---\ntitle: A\n---\n# A\n## Facts\n- owner: Ann\n")
    return made


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.read(123), "Memory.read(): path must be text, not int 123"),
        (lambda m: m.read(lines=5), "Memory.read(): lines must be text or None, not int 5"),
        (lambda m: m.write("topics/a.md", set="t=x"), "Memory.write(): set must be a mapping of text to values"),
        (lambda m: m.mv(None, "topics/b.md"), "Memory.mv(): source must be text, not None"),
        (lambda m: m.read(), "Memory.read() needs path (text)"),
        (lambda m: m.read("topics/a.md", "x"), "Memory.read() takes at most 1 positional argument(s) (path), not 2"),
        (lambda m: m.ls(maxtokens=5), "Memory.ls() has no argument named 'maxtokens'; it takes path, depth"),
        (lambda m: m.grep("x", "topics"), "Memory.grep(): paths must be a list of text or None, not str 'topics'"),
        (lambda m: m.ls(offset=2**80), "Memory.ls(): offset must be a whole number, not a whole number beyond"),
        (
            lambda m: m.search("x", min_score=math.nan),
            "Memory.search(): min_score must be a number or None, not float nan",
        ),
        (lambda m: m.watch(stop=3), "Memory.watch(): stop must be a threading.Event or None, not int 3"),
        (lambda m: m.write("topics/a.md", set={"t": object()}), "the front matter field 't' holds object"),
        (lambda m: m.write("topics/a.md", set={"t": {1, 2}}), "the front matter field 't' holds set"),
        (lambda m: Memory(123), "Memory(): root must be text or a path or None, not int 123"),
    ],
)
def test_a_wrong_argument_is_an_invalid_argument_with_a_clear_message(memory, call, message):
    before = (memory.root / "topics" / "a.md").read_bytes()
    with pytest.raises(InvalidArgument) as raised:
        call(memory)
    assert str(raised.value).startswith(message), str(raised.value)
    assert (memory.root / "topics" / "a.md").read_bytes() == before


def test_a_field_that_holds_itself_is_refused_and_an_iterator_is_read_once(memory):
    loop: list = []
    loop.append(loop)
    with pytest.raises(InvalidArgument, match="the front matter field 't' holds itself"):
        memory.write("topics/a.md", set={"t": loop})
    assert [m.path for m in memory.grep("owner", iter(["topics"])).matches] == ["topics/a.md"]
    memory.write("topics/a.md", set={"tags": ("x", ("y",)), "when": {"on": [1, 2.5, None, True]}})
    assert memory.meta("topics/a.md").front_matter["tags"] == ["x", ["y"]]


# -- every public method, with values of every type ------------------------------------------------------
SET_EVENT = threading.Event()
SET_EVENT.set()
VALUES = [
    None,
    True,
    0,
    1,
    -1,
    2**70,
    1.5,
    math.inf,
    "",
    "x",
    "topics/a.md",
    "topics",
    "a\x00b",
    "\ud800",
    b"x",
    ["x"],
    ["topics/a.md"],
    [1],
    ("topics",),
    {"title": "T"},
    {1: 2},
    {"x"},
    object(),
    Path("topics/a.md"),
    SET_EVENT,
    print,
]


def public_methods() -> list[str]:
    from fsmem.spec import declared

    names = []
    for name in sorted({*vars(Memory), *declared()}):  # a declared operation is put on Memory on first use
        value = vars(Memory).get(name, getattr(Memory, name))
        if (name.startswith("_") and name != "__init__") or isinstance(value, property):
            continue
        if isinstance(value, classmethod) or callable(getattr(Memory, name)):  # an operation loads on first use
            names.append(name)
    return sorted(names)


def fits(annotation: str, value) -> bool:
    """The test's own reading of an annotation (independent of fsmem.arguments): does `value` have that type?"""
    ok = False
    for part in (p.strip() for p in annotation.split("|")):
        if part == "None":
            ok |= value is None
        elif part == "str":
            ok |= isinstance(value, str)
        elif part == "int":
            ok |= type(value) is int and abs(value) < 2**63
        elif part == "float":
            ok |= type(value) in (int, float) and math.isfinite(value) and abs(value) < 2**63
        elif part == "bool":
            ok |= type(value) is bool
        elif part in ("os.PathLike[str]", "Path"):
            ok |= isinstance(value, os.PathLike)
        elif part in ("Iterable[str]", "Prefixes"):
            ok |= isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
            ok |= part == "Prefixes" and (value is None or isinstance(value, (str, Scope)))
        elif part == "Iterable[int]":
            ok |= isinstance(value, (list, tuple)) and all(type(v) is int for v in value)
        elif part.startswith("dict[str"):
            ok |= isinstance(value, dict) and all(isinstance(k, str) for k in value)
        elif part.startswith("list["):
            ok |= isinstance(value, list) and (part == "list[Any]" or all(isinstance(v, tuple) for v in value))
        elif part.startswith(("Callable", "Progress")):
            ok |= callable(value)
        elif part == "threading.Event":
            ok |= isinstance(value, threading.Event)
        else:
            raise AssertionError(f"the test does not know the annotation {part!r}")
    return ok


def parameters(name: str) -> list[inspect.Parameter]:
    """The arguments a caller gives (the first parameter is the memory, or its class)."""
    function = inspect.unwrap(getattr(Memory, name))
    return list(inspect.signature(function).parameters.values())[1:]


@st.composite
def calls(draw):
    name = draw(st.sampled_from(public_methods()))
    chosen = {}
    for param in parameters(name):
        if param.default is inspect.Parameter.empty or draw(st.booleans()):
            right = [value for value in VALUES if fits(str(param.annotation), value)]
            pool = right if right and draw(st.integers(0, 3)) else VALUES  # mostly right: the call gets far
            chosen[param.name] = draw(st.sampled_from(pool))
    if name == "watch":
        chosen["stop"] = SET_EVENT  # a watch that is not told to stop runs until it is
    if name == "init":
        chosen["directory"] = draw(st.sampled_from(["new", Path("other"), None, 7, b"x", ["x"]]))
    return name, chosen


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=calls())
def test_every_public_method_raises_only_fsmem_errors_and_invalid_argument_for_a_wrong_type(memory, call):
    name, arguments = call
    wrong = [key for key, value in arguments.items() if not fits(_annotation(name, key), value)]
    target = Memory if name in ("__init__", "init") else memory
    method = Memory if name == "__init__" else getattr(target, name)
    try:
        method(**arguments)
    except InvalidArgument:
        event(f"{name}: InvalidArgument")
        return
    except FsmemError as exc:
        event(f"{name}: {type(exc).__name__}")
        assert not wrong, f"{name}({arguments}): a wrong type passed the argument check"
        return
    except Exception as exc:  # noqa: BLE001  (the point: nothing else may leave a Memory method)
        raise AssertionError(f"{name}({arguments}) raised {type(exc).__name__}: {exc}") from exc
    event(f"{name}: answered")
    assert not wrong, f"{name}({arguments}) took {wrong} of the wrong type"


def _annotation(name: str, key: str) -> str:
    return next(str(p.annotation) for p in parameters(name) if p.name == key)


def test_every_public_method_is_covered():
    assert {"__init__", "init", "read", "write", "mv", "grep", "search", "watch", "consolidate", "sync"} <= set(
        public_methods()
    )
    for name in public_methods():
        for param in parameters(name):
            fits(str(param.annotation), None)  # the test knows every annotation in use


# -- fsmem.yaml of the wrong types -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "  timeout_seconds: 10 ",
            "  timeout_seconds: abc",
            "grep.timeout_seconds must be a number above 0, not 'abc'",
        ),
        (
            "      max_tokens: 4000",
            "      max_tokens: lots",
            "budgets.agents.researcher.max_tokens must be a whole number of at least 1, not 'lots'",
        ),
        (
            "  max_line_chars: 2000",
            "  max_line_chars: [1]",
            "read.max_line_chars must be a whole number of at least 1, not [1]",
        ),
        ("  min_score: 0.06", "  min_score: high", "search.min_score must be a number of at least 0, not 'high'"),
        ("    text: 1.0 ", "    text: heavy ", "search.weights.text must be a number of at least 0, not 'heavy'"),
        ("  enabled: true ", "  enabled: maybe ", "history.enabled must be true or false, not 'maybe'"),
        ("read:\n", "read: 5\nx:\n", "read must be a mapping of settings, not 5"),
        (
            "  index_max_tokens: 1500",
            "  index_max_tokens: 15.5",
            "consolidate.index_max_tokens must be a whole number of at least 1, not 15.5",
        ),
    ],
)
def test_a_setting_of_the_wrong_type_is_a_config_error_naming_it_its_value_and_its_line(tmp_path, old, new, message):
    memory = Memory.init(tmp_path / "m")
    config = memory.root / "fsmem.yaml"
    text = config.read_text()
    assert old in text
    changed = text.replace(old, new, 1)
    config.write_text(changed)
    line = changed[: changed.index(new)].count("\n") + 1
    with pytest.raises(ConfigError) as raised:
        Memory(memory.root)
    assert str(raised.value) == f"{config}:{line}: {message}"


def test_the_cli_says_which_setting_and_set_with_an_alias_is_refused_clearly(tmp_path):
    memory = Memory.init(tmp_path / "m")
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  timeout_seconds: 10 ", "  timeout_seconds: abc", 1))
    env = without_fsmem()
    done = subprocess.run([FSMEM, "--root", str(memory.root), "grep", "x"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert done.stderr == f"fsmem: error: {config}:26: grep.timeout_seconds must be a number above 0, not 'abc'\n"
    other = Memory.init(tmp_path / "n")
    for value, says in (
        ("title=&a [*a]", "--set title: YAML anchors and aliases (&name, *name) are not taken in a value"),
        ("title=" + "[" * 5000, "--set title: the value is nested too deeply"),
    ):
        done = subprocess.run(
            [FSMEM, "--root", str(other.root), "write", "topics/x.md", "--keep-body", "--set", value],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 2 and done.stderr.startswith(f"fsmem: error: {says}"), done.stderr
    assert not (other.root / "topics" / "x.md").exists()
    quoted = subprocess.run(
        [FSMEM, "--root", str(other.root), "write", "topics/x.md", "--keep-body", "--set", 'title="&a [*a]"'],
        capture_output=True,
        text=True,
        env=env,
    )
    assert quoted.returncode == 0 and "title: '&a [*a]'" in (other.root / "topics" / "x.md").read_text()


def test_each_public_method_has_one_argument_check_read_in_its_own_module() -> None:
    """`fsmem_errors` wrapped each of Core's methods twice (the wrapper it had just set was wrapped again),
    and the outer check read Core's annotations among fsmem.memory's names, parsing that module's source to
    look for `Prefixes`: 1.3 ms of every `Memory()`, and two checks of every call."""
    from fsmem.memory import _Operation
    from fsmem.operations.core import Core

    public = [name for name, value in vars(Core).items() if callable(value) and (name == "__init__" or name[0] != "_")]
    assert public == ["__init__", "close", "path", "visible", "forget_history"]
    for name in public:
        method = vars(Memory)[name]
        assert method.__wrapped__ is vars(Core)[name], name
    grep = vars(Memory)["grep"]
    checked = grep.load() if isinstance(grep, _Operation) else grep
    assert not hasattr(checked.__wrapped__, "__wrapped__")


# -- the limits the spec declares (minimum, choices): one check, at Memory's boundary, on every face ---------------
# what each operation needs besides the argument tested, so that the call reaches the check
NEEDED = {"pattern": "x", "query": "x", "path": "topics/a.md", "subject": "people/Ann", "at": "HEAD"}


def _declared_limits() -> list[tuple[str, str, dict]]:
    from fsmem.spec import declared
    from fsmem.spec.schema import limits

    return [(op, name, found) for op, params in limits(declared().values()).items() for name, found in params.items()]


def _beyond(found: dict):
    """A value just beyond the limits: one below the minimum, or a choice there is not."""
    return found["minimum"] - 1 if "minimum" in found else "no-such-choice"


def _required(op_name: str, tested: str) -> dict:
    from fsmem.spec import declared

    op = declared()[op_name]
    return {p.name: NEEDED[p.name] for p in op.params if p.required and p.name != tested}


def test_the_limits_checked_are_those_the_spec_declares():
    """`fsmem.arguments.LIMITS` is written from the spec (a plain grep checks them without loading it): a minimum
    or choices added to a declaration fails here until `python -m fsmem.cli.generated` rewrites it."""
    from fsmem import arguments
    from fsmem.cli import generated

    text = Path(arguments.__file__).read_text(encoding="utf-8")
    written = generated.LIMITS_BEGIN + text.split(generated.LIMITS_BEGIN, 1)[1].split(generated.LEAN_END, 1)[0]
    assert written + generated.LEAN_END == generated.limits_table(), "run: python -m fsmem.cli.generated"
    assert {(op, name) for op, name, _ in _declared_limits()} >= {
        ("grep", "context_lines"),
        ("ls", "depth"),
        ("ls", "offset"),
        ("search", "max_results"),
        ("read", "max_tokens"),
        ("import_from", "format"),
        ("distill", "episode_tokens"),
    }


def test_the_limits_are_rewritten_from_the_spec(tmp_path):
    from fsmem import arguments
    from fsmem.cli import generated

    copy = tmp_path / "arguments.py"
    text = Path(arguments.__file__).read_text(encoding="utf-8")
    copy.write_text(
        text.replace('"context_lines": {"minimum": 0}', '"context_lines": {"minimum": 7}'), encoding="utf-8"
    )
    assert generated.write_limits(str(copy))
    assert copy.read_text(encoding="utf-8") == text
    assert not generated.write_limits(str(copy))


@pytest.mark.parametrize("op, name, found", _declared_limits(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_value_beyond_a_declared_limit_is_refused_by_the_method_in_the_api_words(memory, op, name, found):
    """Every minimum and choice list of the spec holds at `Memory`'s boundary, before the operation runs, with
    no check of its own in the operation (an offset of -1 to links or timeline was worded by another check)."""
    before = {p: p.read_bytes() for p in memory.root.rglob("*") if p.is_file()}
    with pytest.raises(InvalidArgument) as raised:
        getattr(memory, op)(**_required(op, name), **{name: _beyond(found)})
    if "minimum" in found:
        says = "0 or more" if found["minimum"] == 0 else f"at least {found['minimum']}"
        assert str(raised.value) == f"{name} must be {says}"
    else:
        assert str(raised.value) == f"{name} must be one of {', '.join(found['enum'])}, not 'no-such-choice'"
    assert {p: p.read_bytes() for p in memory.root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "op, name, found",
    [
        (op, name, found)
        for op, name, found in _declared_limits()
        if op != "import_from"  # a group of commands, one per format
        and name != "max_tokens"  # the command line fits its budget before the call (cli.printing.print_within)
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_value_beyond_a_declared_limit_is_refused_by_the_command_in_its_flags(memory, op, name, found):
    from fsmem.spec import declared

    declaration = declared()[op]
    operands = [str(value) for key, value in _required(op, name).items() if declaration.param(key).positional]
    flag = declaration.param(name).cli_flag
    env = without_fsmem()
    done = subprocess.run(
        [FSMEM, "--root", str(memory.root), op, *operands, f"{flag}={_beyond(found)}"],
        capture_output=True,
        text=True,
        env=env,
    )
    if "minimum" in found:
        says = "0 or more" if found["minimum"] == 0 else f"at least {found['minimum']}"
    else:
        says = f"one of {', '.join(found['enum'])}, not 'no-such-choice'"
    assert (done.returncode, done.stderr) == (2, f"fsmem: error: {flag} must be {says}\n")


def test_a_plain_grep_checks_the_declared_limits_without_the_spec(memory):
    """The lean `fsmem grep` (`fsmem.cli.lean`) takes `-C 2` itself and never loads the spec: the limits it is held
    to are the table written from it, and a value within them passes."""
    env = without_fsmem()
    done = subprocess.run(
        [FSMEM, "--root", str(memory.root), "grep", "owner", "-C", "2"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and "topics/a.md" in done.stdout, done.stderr


def test_a_value_at_a_declared_limit_passes(memory):
    assert memory.grep("owner", context_lines=0).matches
    assert [e.path for e in memory.ls("topics", depth=1, offset=0, max_results=1).entries] == ["topics/a.md"]
    with pytest.raises(InvalidArgument, match="give the command to run"):
        memory.distill(episode_tokens=64)  # past the check: the operation's own question comes next


# what the operations need besides the text tested, so that the call reaches the check (a valid value each)
TEXT_NEEDED = {**NEEDED, "text": "- owner: Ann", "old": "Ann", "new": "Bo", "source": "topics/a.md"}
TEXT_NEEDED |= {"target": "topics/b.md", "rev": "HEAD", "format": "markdown"}


def _declared_texts() -> list[tuple[str, str]]:
    from fsmem.spec import declared

    return [(name, p.name) for name, op in declared().items() for p in op.params if p.kind in ("str", "list")]


@pytest.mark.parametrize("op, name", _declared_texts(), ids=lambda v: v)
@pytest.mark.parametrize("bad, problem", [("a\x00b", "contains a NUL byte"), ("a\ud800b", "contains '\\ud800'")])
def test_text_that_is_none_is_refused_by_every_operation_in_the_api_words(memory, op, name, bad, problem):
    """Every text argument of every declared operation (and each text of a list) is held to be text at `Memory`'s
    boundary, named as the face names it, before anything runs: the operations do not check it again."""
    from fsmem.spec import declared

    declaration = declared()[op]
    value = [bad] if declaration.param(name).kind == "list" else bad
    required = {p.name: TEXT_NEEDED[p.name] for p in declaration.params if p.required and p.name != name}
    before = {p: p.read_bytes() for p in memory.root.rglob("*") if p.is_file()}
    with pytest.raises(InvalidArgument) as raised:
        getattr(memory, op)(**{name: value}, **required)
    assert str(raised.value).startswith(f"{name} {problem}") and str(raised.value).endswith("; nothing was stored")
    assert {p: p.read_bytes() for p in memory.root.rglob("*") if p.is_file()} == before


def test_the_command_line_names_the_operand_that_is_not_text(memory):
    """Bytes that are not UTF-8 in an argument reach a command as a lone surrogate (`surrogateescape`): refused
    with exit 2, the operand named as the command line spells it."""
    env = without_fsmem()
    for command in (["search", b"a\xffb"], ["timeline", b"people/\xff"], ["grep", b"a\xffb"]):
        done = subprocess.run([FSMEM, "--root", str(memory.root), *command], capture_output=True, env=env)
        operand = {"search": "QUERY", "timeline": "SUBJECT", "grep": "PATTERN"}[command[0]]
        assert done.returncode == 2 and done.stderr.decode().startswith(
            f"fsmem: error: {operand} contains '\\udcff', which is not text"
        ), done.stderr
