"""One decoder for every protocol face (issue 31, finding 8): the same payloads, the same JSON-RPC errors, from a
real `fsmem mcp` and a real `fsmem serve`, and both still up after each.

Before: `"\\udfff"` (and a batch or an object id holding a lone surrogate) ended `fsmem mcp` with exit 2; a
plain batch, `params` given as a list and arguments nested 400 levels got no answer at all; over HTTP the same
bodies got a 500, and `tools.call` raised RecursionError on arguments nested 500 levels.
"""

from __future__ import annotations

import pytest
from protocol_faces import Http, Stdio, check
from test_tools import build_memory

from fsmem import Memory
from fsmem.agents import jsonrpc, tools

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def call(arguments: str, id_: int = 9) -> str:
    return f'{{"jsonrpc": "2.0", "id": {id_}, "method": "tools/call", "params": {{"name": "grep", "arguments": {arguments}}}}}'


LIST = '{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}'
# (what, the raw message, the JSON-RPC error code it gets, the id of its answer); code None: a tool answer (isError)
PAYLOADS = [
    ("a lone surrogate", '"\\udfff"', jsonrpc.INVALID_REQUEST, None),
    ("a batch holding a lone surrogate", '[{"jsonrpc": "2.0", "id": 1, "method": "\\udfff"}]', -32600, None),
    (
        "an object id holding a lone surrogate",
        '{"jsonrpc": "2.0", "id": {"a": "\\udfff"}, "method": "ping"}',
        -32600,
        None,
    ),
    ("a string id holding a lone surrogate", '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}', -32600, None),
    ("a plain batch", f"[{LIST}]", jsonrpc.INVALID_REQUEST, None),
    ("an empty batch", "[]", jsonrpc.INVALID_REQUEST, None),
    (
        "params as a list",
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": []}',
        jsonrpc.INVALID_PARAMS,
        2,
    ),
    ("params as a string", '{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": "x"}', -32600, 3),
    ("an object id", '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', jsonrpc.INVALID_REQUEST, None),
    ("a float id", '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', jsonrpc.INVALID_REQUEST, None),
    ("a null id", '{"jsonrpc": "2.0", "id": null, "method": "ping"}', jsonrpc.INVALID_REQUEST, None),
    ("a method that is a number", '{"jsonrpc": "2.0", "id": 4, "method": 7}', jsonrpc.INVALID_REQUEST, 4),
    ("no jsonrpc", '{"id": 6, "method": "ping"}', jsonrpc.INVALID_REQUEST, 6),
    ("NaN", '{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": NaN}}', jsonrpc.PARSE_ERROR, None),
    ("not JSON", "{nope", jsonrpc.PARSE_ERROR, None),
    ("arguments nested 40 levels", call(nested(40)), jsonrpc.INVALID_REQUEST, None),
    ("arguments nested 400 levels", call(nested(400)), jsonrpc.INVALID_REQUEST, None),
    ("arguments nested 500 levels", call(nested(500)), jsonrpc.INVALID_REQUEST, None),
    ("a message nested 100000 levels", nested(100_000), jsonrpc.INVALID_REQUEST, None),
    ("a lone surrogate in a tool argument", call('{"pattern": "\\ud800"}'), None, 9),
    ("a lone surrogate in an argument's name", call('{"pattern": "x", "\\udfff": 1}'), None, 9),
    ("arguments as a list", call("[1, 2]"), jsonrpc.INVALID_PARAMS, 9),
    ("an unknown method", '{"jsonrpc": "2.0", "id": 8, "method": "tools/destroy"}', -32601, 8),
]


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faces")
    root = build_memory(tmp)
    stdio, http = Stdio(root), Http(root, tmp)
    yield [stdio, http]
    assert http.stop() == 0
    assert stdio.stop() == 0


@pytest.mark.parametrize(("what", "raw", "code", "id_"), PAYLOADS, ids=[p[0] for p in PAYLOADS])
def test_every_face_answers_a_bad_message_with_its_jsonrpc_error_and_stays_up(faces, what, raw, code, id_):
    for face in faces:
        answers = face.send(raw)
        check(raw, answers)
        assert len(answers) == 1, (face.name, answers)
        answer = answers[0]
        assert answer["id"] == id_, (face.name, answer)
        if code is None:
            assert answer["result"]["isError"], (face.name, answer)
        else:
            assert answer["error"]["code"] == code, (face.name, answer)
        assert face.send(LIST)[0]["result"]["tools"], face.name  # still up, and still serving


def test_tools_call_never_raises_whatever_the_nesting(tmp_path):
    memory = Memory(build_memory(tmp_path))
    for levels in (33, 400, 600, 5000):
        value: object = "x"
        for _ in range(levels):
            value = [value]
        for arguments in ({"pattern": value}, '{"pattern": ' + nested(levels) + "}"):
            answer = tools.call(memory, "grep", arguments)
            assert answer.is_error and "nested more than 32 levels" in answer.text
    answer = tools.call(memory, "grep", '{"pattern": ' + "9" * 5000 + "}")
    assert answer.is_error and answer.text.startswith("error: the arguments are not valid JSON")
