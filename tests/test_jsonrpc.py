"""`fsmem.agents.jsonrpc`: the one decoder of a message, in-process (the faces: tests/test_protocol_faces.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("mcp")
from fsmem.agents.jsonrpc import MAX_DEPTH, Refused, decode  # noqa: E402


def refused(data: str | bytes) -> tuple[int, str, object]:
    with pytest.raises(Refused) as caught:
        decode(data, {})
    return caught.value.code, caught.value.message, caught.value.id


def test_a_plain_message_passes_unchanged():
    text = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    decoded = decode(text, {})
    assert decoded.text is text and not decoded.changed and decoded.message["id"] == 1
    assert decode(text.encode(), {}).text == text


@pytest.mark.parametrize(
    ("data", "code", "id_"),
    [
        (b"\xff", -32700, None),
        ("{", -32700, None),
        ('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": Infinity}}', -32700, None),
        ('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1e999}}', -32700, None),
        ("9" * 5000, -32700, None),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), -32600, None),
        ("[" * 100_000, -32600, None),
        ("[]", -32600, None),
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, None),
        ('"\\udfff"', -32600, None),
        ("null", -32600, None),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600, None),
        ('{"jsonrpc": "2.0", "id": "\\udfff", "method": "ping"}', -32600, None),
        ('{"jsonrpc": "2.0", "id": 2, "method": ["ping"]}', -32600, 2),
        ('{"jsonrpc": "2.0", "id": "a", "method": "ping", "params": null}', -32600, "a"),
        ('{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": [1]}', -32602, 3),
        ('{"jsonrpc": "2.0", "id": 4}', -32600, None),
        ('{"jsonrpc": "2.0", "id": 5, "result": {}, "error": {"code": 1, "message": "x"}}', -32600, None),
    ],
)
def test_each_fault_gets_the_error_json_rpc_names(data, code, id_):
    got_code, message, got_id = refused(data)
    assert (got_code, got_id) == (code, id_), message
    assert message.split(":")[0] in ("Parse error", "Invalid request", "Invalid params")


def test_a_lone_surrogate_in_tool_arguments_is_held_for_the_dispatcher_and_elsewhere_replaced():
    held: dict = {}
    text = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "g\\ud800", "arguments": {"p": "\\ud800"}}}'
    decoded = decode(text, held)
    assert held == {7: {"p": "\ud800"}} and decoded.changed
    assert json.loads(decoded.text)["params"] == {"name": "g\ufffd", "arguments": {}}


def test_a_response_of_the_client_passes():
    assert decode('{"jsonrpc": "2.0", "id": 1, "result": {}}', {}).message["result"] == {}


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.recursive(st.none() | st.integers() | st.text(), st.lists).map(json.dumps)))
def test_anything_is_decoded_or_refused_never_raised_otherwise(data):
    try:
        decode(data, {})
    except Refused:
        pass
