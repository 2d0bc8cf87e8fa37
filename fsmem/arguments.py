"""Arguments checked on the way in to a public method, against its annotations and the spec's limits: `InvalidArgument`.

The README promises that only `FsmemError` leaves a `Memory` method; a `read(123)` or a `write(set="t=x")`
used to raise TypeError, AttributeError or a YAML error from deep inside. `ArgumentCheck(method)` reads the
method's annotations once, on its first call, and checks every call against them: the count and names of the
arguments, and the type of each value (text, a whole number, a number, True or False, a path, a list of
text, a mapping of text…). The values themselves (a path that escapes, a range that is no range) are the
method's to judge, but for what every operation asks alike: text must be text, with no NUL byte and no
lone surrogate (`not_text`; the store still checks what it writes).

The annotations are strings (`from __future__ import annotations`); each is
read with `ast`, names are looked up in the method's module, and a name that
exists only for the type checker accepts any value. A whole number must fit
in 64 bits and a number must be finite, so that no OverflowError or NaN gets
past the check either. A text is not taken as a list of its characters.

A declared operation's arguments are also held to their declaration's limits (`fsmem.spec.Param`'s
`minimum` and `choices`, a JSON schema's `minimum` and `enum`), here and nowhere else: the operations
do not check them again, and the tools' dispatcher leaves them to this check (`fsmem.agents.registry`).
They are read from the spec (`declared_limits`), but grep's from `LIMITS`, written from grep's declaration
by `python -m fsmem.cli.generated` (tests/test_arguments.py asks that it is what the spec makes now), so
that a plain `fsmem grep` checks them without loading the spec. A value beyond them is refused in the words
of the face being answered (`fsmem.faces`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import os
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import PurePath
from typing import Any

from fsmem import faces
from fsmem.budget import echo
from fsmem.errors import InvalidArgument

LIMIT = 1 << 63  # a whole number must be within ±2**63: SQLite, offsets and slices all take that

# -- generated from the spec's parameters by `python -m fsmem.cli.generated`; do not edit --
LIMITS: dict[str, dict[str, dict[str, Any]]] = {
    "grep": {
        "context_lines": {"minimum": 0},
        "type": {"enum": ["semantic", "episodic", "procedural"]},
        "offset": {"minimum": 0},
        "max_results": {"minimum": 1},
        "max_tokens": {"minimum": 1},
    },
}
# -- end of what is generated --


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text (a NUL byte, a lone surrogate), or None."""
    if "\x00" in value:
        return "contains a NUL byte"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"contains {value[exc.start]!r}, which is not text (a lone surrogate, or bytes that are not UTF-8)"
    return None


def not_text(name: str, value: Any, command: str | None = None) -> str | None:
    """Why text given as argument `name` (or an item of a list of texts) is no text, in the face's words
    (`--subject contains a NUL byte; nothing was stored`); None when it is text or no text was given."""
    texts = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
    problem = next((found for text in texts if isinstance(text, str) and (found := text_problem(text))), None)
    if problem is None:
        return None
    if faces.current().kind == faces.TOOLS:
        return f"argument '{name}' {problem}; send plain text"
    return f"{faces.arg(name, command)} {problem}; nothing was stored"


def beyond(name: str, value: Any, limits: Mapping[str, Any], command: str | None = None) -> str | None:
    """What keeps `value` of argument `name` from its limits (a JSON schema's `minimum` and `enum`), in the words
    of the face being answered (`argument 'offset' must be at least 0`, `--offset must be 0 or more`); None when
    it is within them. `value` is of the argument's type already; None is never beyond."""
    if value is None:
        return None
    choices = limits.get("enum")
    if choices is not None and value not in choices:
        listed = ", ".join(map(str, choices))
        if faces.current().kind == faces.TOOLS:
            return f"argument '{name}' must be one of: {listed}"
        return f"{faces.arg(name, command)} must be one of {listed}, not {echo(value)}"
    minimum = limits.get("minimum")
    if minimum is not None and value < minimum:
        if faces.current().kind == faces.TOOLS:
            return f"argument '{name}' must be at least {minimum}"
        return f"{faces.arg(name, command)} must be {'0 or more' if minimum == 0 else f'at least {minimum}'}"
    return None


class Rule:
    """One annotation, compiled: whether a value passes, and how the message names what was expected."""

    __slots__ = ("ok", "says", "iterable")

    def __init__(self, ok: Callable[[Any], bool], says: str, iterable: bool = False):
        self.ok, self.says = ok, says
        self.iterable = iterable  # an iterator given here is read once, into a tuple, before the check


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -LIMIT < value < LIMIT


def _number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else -LIMIT < value < LIMIT


ANY = Rule(lambda value: True, "anything")
BASIC: dict[str, Rule] = {
    "str": Rule(lambda value: isinstance(value, str), "text"),
    "int": Rule(_whole, "a whole number"),
    "float": Rule(_number, "a number"),
    "bool": Rule(lambda value: isinstance(value, bool), "True or False"),
    "None": Rule(lambda value: value is None, "None"),
    "Any": ANY,
    "object": ANY,
}


def _union(rules: list[Rule]) -> Rule:
    if any(rule is ANY for rule in rules):
        return ANY
    checks = tuple(rule.ok for rule in rules)
    return Rule(
        lambda value: any(check(value) for check in checks),
        " or ".join(rule.says for rule in rules),
        any(rule.iterable for rule in rules),
    )


def _items(rule: Rule, says: str, kinds: tuple[type, ...] = ()) -> Rule:
    """An iterable (not a text or a mapping) whose every item passes `rule`."""

    def ok(value: Any) -> bool:
        if isinstance(value, (str, bytes, bytearray, Mapping, Iterator)) or not isinstance(value, kinds or Iterable):
            return False  # an iterator is read into a tuple first (ArgumentCheck), never consumed by the check
        return rule is ANY or all(rule.ok(item) for item in typing.cast(Iterable[Any], value))

    return Rule(ok, says, iterable=not kinds)


def _mapping(key: Rule, value: Rule) -> Rule:
    def ok(given: Any) -> bool:
        return isinstance(given, Mapping) and all(key.ok(k) and value.ok(v) for k, v in given.items())

    return Rule(ok, f"a mapping of {key.says} to {'values' if value is ANY else value.says}")


def _of_type(cls: type) -> Rule:
    if cls is type(None):
        return BASIC["None"]
    if cls in (str, int, float, bool, object):
        return BASIC[cls.__name__]
    if cls is os.PathLike or (isinstance(cls, type) and issubclass(cls, PurePath)):
        return Rule(lambda value: isinstance(value, (os.PathLike, PurePath)), "a path")
    name = (
        cls.__qualname__ if cls.__module__.startswith(("fsmem", "builtins")) else f"{cls.__module__}.{cls.__qualname__}"
    )
    return Rule(lambda value: isinstance(value, cls), f"{'an' if name[0] in 'AEIOUaeiou' else 'a'} {name}")


def _runtime(hint: Any) -> Rule:
    """A rule from a type object found at run time (a module's alias such as `Prefixes = str | Scope | None`)."""
    if hint is None or hint is type(None):
        return BASIC["None"]
    if hint is Any:
        return ANY
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return _union([_runtime(arg) for arg in typing.get_args(hint)])
    if origin is not None:
        return _generic(origin, [_runtime(arg) for arg in typing.get_args(hint)])
    return _of_type(hint) if isinstance(hint, type) else ANY


def _generic(origin: Any, args: list[Rule]) -> Rule:
    item = args[0] if args else ANY
    if origin in (list, "list"):
        return _items(item, f"a list of {item.says}", (list,))
    if origin in (tuple, "tuple"):
        return _items(_union(args) if args else ANY, "a tuple", (tuple,))
    if origin in (dict, Mapping, "dict", "Mapping"):
        return _mapping(item, args[1] if len(args) > 1 else ANY)
    if origin in (Iterable, "Iterable", "Sequence", "set", "frozenset"):
        return _items(item, f"a list of {item.says}")
    if origin in (Callable, "Callable"):
        return Rule(callable, "a function")
    if origin is os.PathLike or origin == "PathLike":
        return _of_type(os.PathLike)
    return ANY


class _Reader:
    """Annotation text to a Rule, names looked up in the method's module (then among loaded modules)."""

    def __init__(self, names: Mapping[str, Any]):
        self.names = names
        self._checking: dict[str, str] | None = None

    def rule(self, annotation: str) -> Rule:
        try:
            return self.node(ast.parse(annotation, mode="eval").body)
        except SyntaxError:
            return ANY

    def node(self, node: ast.expr) -> Rule:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self.node(node.left), self.node(node.right)])
        if isinstance(node, ast.Constant):
            return (
                BASIC["None"] if node.value is None else self.rule(node.value) if isinstance(node.value, str) else ANY
            )
        if isinstance(node, ast.Subscript):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            base = ast.unparse(node.value).rpartition(".")[2]
            if base == "Callable":
                return Rule(callable, "a function")
            return _generic(base, [self.node(arg) for arg in inner])
        if isinstance(node, (ast.Name, ast.Attribute)):
            dotted = ast.unparse(node)
            if dotted in BASIC:
                return BASIC[dotted]
            found = self.find(dotted)
            return ANY if found is None else _runtime(found)
        return ANY

    def find(self, dotted: str) -> Any:
        head, _, rest = dotted.partition(".")
        value = self.names.get(head, sys.modules.get(head))
        if value is None and head in self.checking_only():
            module, _, attribute = self.checking_only()[head].rpartition(".")
            value = getattr(importlib.import_module(module), attribute, None)
        if value is None and rest:
            try:
                value = importlib.import_module(head)  # a standard module named for the type checker only
            except ImportError:
                return None
        for part in rest.split(".") if rest else []:
            value = getattr(value, part, None)
        return value

    def checking_only(self) -> dict[str, str]:
        """Names the module imports only for the type checker (`if TYPE_CHECKING:`), and where they live."""
        if self._checking is None:
            self._checking = {}
            module = sys.modules.get(str(self.names.get("__name__", "")))
            try:
                tree = ast.parse(inspect.getsource(module)) if module is not None else None
            except (OSError, TypeError):
                tree = None
            for block in tree.body if tree is not None else []:
                if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING"):
                    for node in block.body:
                        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                            for alias in node.names:
                                self._checking[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        return self._checking


def declared_limits(operation: str | None) -> Mapping[str, dict[str, Any]]:
    """The limits the spec declares for the parameters of `operation` (none for a method that is no declared
    operation): grep's from `LIMITS`, written from it, any other's from the spec itself."""
    if operation is None:
        return {}
    if operation in LIMITS:
        return LIMITS[operation]
    from fsmem.spec import declared
    from fsmem.spec.schema import limits

    op = declared().get(operation)
    return {} if op is None else limits([op]).get(operation, {})


def check_limit(operation: str, name: str, value: Any) -> None:
    """InvalidArgument, worded by `beyond`, when `value` of `operation`'s argument `name` is beyond its declared
    limits: for a value a face changes before `Memory` sees it (the CLI asks for the answer with the room its
    `--max-tokens` leaves for the trailer, `fsmem.cli.printing.print_within`)."""
    problem = beyond(name, value, declared_limits(operation).get(name, {}), operation)
    if problem is not None:
        raise InvalidArgument(problem)


class Slot:
    """One argument of a method, compiled: its name, its type's rule, whether it is required, and its limits."""

    __slots__ = ("name", "rule", "required", "limits")

    def __init__(self, name: str, rule: Rule, required: bool, limits: Mapping[str, Any] | None = None):
        self.name, self.rule, self.required, self.limits = name, rule, required, limits


class ArgumentCheck:
    """The argument check of one method; compiled on its first call (start-up pays nothing). `operation` names
    the declared operation the method is (`Memory.grep` is "grep"), whose limits (`declared_limits`) it also checks."""

    def __init__(self, method: Callable[..., Any], where: str, operation: str | None = None):
        self.method, self.where, self.operation = method, where, operation
        self.positional: list[Slot] | None = None
        self.by_name: dict[str, Slot] = {}
        self.required: list[Slot] = []

    def _compile(self) -> None:
        signature = inspect.signature(self.method)
        reader = _Reader(getattr(self.method, "__globals__", {}))
        limits = declared_limits(self.operation)
        positional = []
        for index, p in enumerate(signature.parameters.values()):
            if index == 0 or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue  # self or cls
            annotation = p.annotation if isinstance(p.annotation, str) else ""
            rule = reader.rule(annotation) if annotation else ANY
            param = Slot(p.name, rule, p.default is p.empty, limits.get(p.name))
            self.by_name[p.name] = param
            if p.kind is p.POSITIONAL_OR_KEYWORD:
                positional.append(param)
            if param.required:
                self.required.append(param)
        self.positional = positional

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`(args, kwargs)` as the method may be called with (an iterator read into a tuple); InvalidArgument if not."""
        if self.positional is None:
            self._compile()
        assert self.positional is not None
        given = len(args) - 1
        if given > len(self.positional):
            names = ", ".join(p.name for p in self.positional) or "none"
            raise InvalidArgument(
                f"{self.where} takes at most {len(self.positional)} positional argument(s) ({names}), not {given}"
            )
        for index in range(given):
            param = self.positional[index]
            value = args[index + 1]
            if not param.rule.ok(value):
                args = self._again(args, index + 1, param, value)
            self._within(param, args[index + 1])
        for name, value in kwargs.items():
            named = self.by_name.get(name)
            if named is None:
                raise InvalidArgument(
                    f"{self.where} has no argument named {echo(name)}; it takes {', '.join(self.by_name) or 'none'}"
                )
            if any(p.name == name for p in self.positional[:given]):
                raise InvalidArgument(f"{self.where} got {name} twice, by position and by name")
            if not named.rule.ok(value):
                kwargs = {**kwargs, name: self._converted(named, value)}
            self._within(named, kwargs[name])
        for param in self.required:
            if param.name not in kwargs and not any(p is param for p in self.positional[:given]):
                raise InvalidArgument(f"{self.where} needs {param.name} ({param.rule.says})")
        return args, kwargs

    def _within(self, param: Slot, value: Any) -> None:
        """InvalidArgument, worded by `not_text` when an operation is given text that is none, by `beyond` when
        `value` is beyond the limits."""
        problem = None if self.operation is None else not_text(param.name, value, self.operation)
        if problem is None and param.limits is not None:
            problem = beyond(param.name, value, param.limits, self.operation)
        if problem is not None:
            raise InvalidArgument(problem)

    def _again(self, args: tuple[Any, ...], index: int, param: Slot, value: Any) -> tuple[Any, ...]:
        return (*args[:index], self._converted(param, value), *args[index + 1 :])

    def _converted(self, param: Slot, value: Any) -> Any:
        """An iterator (read once, into a tuple) that then passes; else InvalidArgument naming what was expected."""
        if param.rule.iterable and isinstance(value, Iterator):
            value = tuple(value)
            if param.rule.ok(value):
                return value
        kind = faces.current().kind
        # worded for the face, as `beyond` words a limit: a number no face's type check refused (`--min-score nan`)
        named = f"argument '{param.name}'" if kind == faces.TOOLS else faces.arg(param.name, self.operation)
        if value is None:
            shown = "None"
        elif isinstance(value, int) and not isinstance(value, bool) and not -LIMIT < value < LIMIT:
            if kind in (faces.CLI, faces.TOOLS):
                raise InvalidArgument(f"{named} must be within ±2**63, not {value:.3g}")
            shown = "a whole number beyond ±2**63"
        elif isinstance(value, float) and not math.isfinite(value) and kind in (faces.CLI, faces.TOOLS):
            raise InvalidArgument(f"{named} must be a finite number, not {value}")
        else:
            shown = f"{type(value).__name__} {echo(value)}"
        raise InvalidArgument(f"{self.where}: {param.name} must be {param.rule.says}, not {shown}")
