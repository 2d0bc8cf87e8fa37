"""The protocol fuzzer: hypothesis strategies for every kind of message a client may send, and one run over faces.

Each run draws, per example, one message of every kind in `KINDS` (and one
`tools/call` for every tool), sends each to every face (`protocol_faces`:
a real `fsmem mcp` and a real `fsmem serve`) and checks its answers
(`protocol_faces.check`): one well-formed answer, or none for a
notification, and the server still up. `Tally` counts what was tried, per
kind and face, and how it was answered. tests/test_protocol_fuzz.py runs a
few examples; benchmarks/bench_protocol_fuzz.py many more, and prints the tally.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from protocol_faces import check

from fsmem.agents.registry import REGISTRY

KNOWN_METHODS = [
    "ping",
    "initialize",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
    "completion/complete",
    "notifications/cancelled",
    "notifications/initialized",
]
TOOLS = sorted(REGISTRY)
HUGE = 300_000  # characters of the longest string (its message stays within the server's 1 MiB body limit)

surrogate = st.integers(0xD800, 0xDFFF).map(chr)
text = st.text(max_size=40)
odd_text = st.one_of(text, st.lists(st.one_of(st.characters(), surrogate), max_size=12).map("".join))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(odd_text, inner, max_size=4)),
    max_leaves=12,
)
ids = st.one_of(st.integers(-(2**40), 2**40), text, json_values)


def envelope(method: Any, params: Any = None, id_: Any = None, notification: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not notification:
        message["id"] = id_
    if params is not None:
        message["params"] = params
    return message


@st.composite
def tool_call(draw: Any, tool: str) -> dict[str, Any]:
    """A `tools/call` of `tool` with arguments of its own names and others, holding any JSON at all."""
    names = list(REGISTRY[tool].parameters.get("properties", {}))
    keys = st.one_of(st.sampled_from(names), odd_text) if names else odd_text
    arguments = draw(st.one_of(st.dictionaries(keys, json_values, max_size=5), json_values))
    return envelope("tools/call", {"name": tool, "arguments": arguments}, draw(st.integers(0, 2**31)))


def with_surrogate(draw: Any) -> dict[str, Any]:
    """A plausible message with a lone surrogate somewhere: the method, the id, a key, a value, an argument."""
    lone = draw(surrogate)
    where = draw(st.sampled_from(["method", "id", "key", "value", "argument", "tool"]))
    if where == "method":
        return envelope("tools/" + lone, {}, 1)
    if where == "id":
        return envelope("ping", None, "id" + lone)
    if where == "key":
        return envelope("tools/list", {lone: 1}, 2)
    if where == "value":
        return envelope("resources/read", {"uri": "fsmem://" + lone}, 3)
    if where == "tool":
        return envelope("tools/call", {"name": "read" + lone, "arguments": {}}, 4)
    tool = draw(st.sampled_from(TOOLS))
    return envelope("tools/call", {"name": tool, "arguments": {"path": lone, lone: lone}}, 5)


@st.composite
def messages(draw: Any) -> list[tuple[str, str | bytes]]:
    """One raw message of every kind, and a `tools/call` of every tool: (kind, raw)."""
    method = draw(st.sampled_from(KNOWN_METHODS))
    fields = draw(st.sets(st.sampled_from(["jsonrpc", "id", "method", "params"])))
    huge = {"query": "x" * draw(st.integers(1, HUGE)), "path": "y" * draw(st.integers(1, 5000))}
    drawn: list[tuple[str, Any]] = [
        ("random JSON", draw(json_values)),
        ("wrong types", {field: draw(json_values) for field in fields}),
        ("surrogates", with_surrogate(draw)),
        ("batch", draw(st.lists(st.one_of(st.just(envelope("ping", None, 1)), json_values), max_size=3))),
        ("huge string", envelope("tools/call", {"name": draw(st.sampled_from(TOOLS)), "arguments": huge}, 7)),
        (
            "unknown method",
            envelope(draw(odd_text.filter(lambda m: m not in KNOWN_METHODS)), draw(json_values), draw(ids)),
        ),
        ("known method", envelope(method, draw(st.one_of(st.none(), json_values)), draw(ids), draw(st.booleans()))),
        (
            "notification",
            envelope(
                draw(st.sampled_from(KNOWN_METHODS + ["x/y"])),
                draw(st.dictionaries(text, json_values, max_size=3)),
                notification=True,
            ),
        ),
        ("params as a list", envelope(method, draw(st.lists(json_values, max_size=3)), draw(st.integers(0, 99)))),
    ]
    raws: list[tuple[str, str | bytes]] = [(kind, json.dumps(value)) for kind, value in drawn]
    depth = draw(st.integers(20, 5000))  # written out: json.dumps recurses through what it writes
    deep = "[" * depth + json.dumps(draw(scalars)) + "]" * depth
    raws.append(
        ("deep nesting", f'{{"jsonrpc": "2.0", "id": 6, "method": {json.dumps(method)}, "params": {{"a": {deep}}}}}')
    )
    broken = draw(st.one_of(text.map(str.encode), st.binary(max_size=60))).replace(b"\n", b" ").replace(b"\r", b" ")
    raws.append(("malformed text", broken))
    cut = json.dumps(envelope("tools/list", {}, 8))
    raws.append(("malformed text", cut[: draw(st.integers(1, len(cut) - 1))]))
    raws += [("tools/call " + tool, json.dumps(draw(tool_call(tool)))) for tool in TOOLS]
    return raws


KINDS = [
    "random JSON",
    "wrong types",
    "surrogates",
    "batch",
    "deep nesting",
    "huge string",
    "unknown method",
    "known method",
    "notification",
    "params as a list",
    "malformed text",
    *["tools/call " + tool for tool in TOOLS],
]


class Tally:
    """What the fuzzer tried, per kind and face, and how each was answered."""

    def __init__(self) -> None:
        self.tried: Counter[tuple[str, str]] = Counter()
        self.outcomes: Counter[tuple[str, str]] = Counter()  # (kind, outcome)

    def record(self, kind: str, face: str, answers: list[dict[str, Any]]) -> None:
        self.tried[(kind, face)] += 1
        if not answers:
            outcome = "no answer (notification)"
        elif "error" in answers[0]:
            outcome = f"error {answers[0]['error']['code']}"
        else:
            outcome = "tool error" if answers[0]["result"].get("isError") else "result"
        self.outcomes[(kind, outcome)] += 1

    def missing(self, faces: list[str]) -> list[tuple[str, str]]:
        return [(kind, face) for kind in KINDS for face in faces if not self.tried[(kind, face)]]

    def rows(self, faces: list[str]) -> list[list[str]]:
        """Per kind: how many were sent to each face, and how they were answered (on all faces)."""
        rows = []
        for kind in KINDS:
            outcomes = sorted((outcome, n) for (k, outcome), n in self.outcomes.items() if k == kind)
            answers = ", ".join(f"{outcome}: {n}" for outcome, n in outcomes)
            rows.append([kind, *(str(self.tried[(kind, face)]) for face in faces), answers])
        return rows


def run(faces: list[Any], examples: int, tally: Tally, seed: int | None = None) -> None:
    """Send `examples` draws of `messages()` to every face, checking each answer; AssertionError at the first fault."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is not None,
        phases=[Phase.explicit, Phase.generate],  # a fault is reported as found: shrinking against servers is slow
        suppress_health_check=list(HealthCheck),
    )
    @given(messages())
    def fuzz(raws: list[tuple[str, str | bytes]]) -> None:
        for kind, raw in raws:
            for face in faces:
                answers = face.send(raw)
                check(raw, answers)
                tally.record(kind, face.name, answers)

    fuzz()
