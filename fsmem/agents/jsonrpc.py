"""One decoder of what a client sends, for every protocol face: `fsmem mcp` (a line) and `fsmem serve` (a body).

A message is either passed on to the MCP SDK, as text its parser takes, or
refused here with the JSON-RPC 2.0 error its fault calls for, so that every
message gets one answer and none can stop a server:

- not UTF-8, not JSON (`NaN`, `Infinity` and numbers out of a float's range
  included): -32700, parse error;
- nested more than `MAX_DEPTH` levels of arrays and objects; a batch (a JSON
  array: MCP has none since 2025-06-18); anything but an object; an `id` that
  is not a string or a whole number (an object, a float, null, one holding a
  lone surrogate); a `jsonrpc` other than "2.0"; a `method` that is not a
  string; `params` that are not structured; an object that is neither a
  request, a notification nor a response: -32600, invalid request;
- `params` given as an array (MCP names every parameter): -32602, invalid params.

The error carries the request's `id` when it has a valid one, else null. A
lone surrogate escaped in JSON (`"\\ud800"`), which the SDK's parser refuses,
is not text: in the arguments of a `tools/call` they are held for the
dispatcher (passed on empty), whose check refuses them by name with the
`isError` tool answer every face gives; anywhere else it becomes U+FFFD.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
MAX_DEPTH = 32  # levels of arrays and objects in a message (a tool call needs about five)
_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


class Refused(Exception):
    """A message answered with a JSON-RPC error here: `code`, `message`, the request's `id` (or None) and, for a
    server's log, a short `reason`."""

    def __init__(self, code: int, message: str, reason: str, id: Any = None):
        super().__init__(message)
        self.code, self.message, self.reason, self.id = code, message, reason, id

    def response(self) -> dict[str, Any]:
        """The JSON-RPC error object to send."""
        return {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}}


@dataclass(frozen=True)
class Decoded:
    """A message the SDK may parse: its `text`, `changed` when it is not the one received, and its value."""

    text: str
    message: Any
    changed: bool = False


def decode(data: bytes | str, held: dict[Any, Any]) -> Decoded:
    """The message `data` holds, as the SDK may take it; Refused for one it must not get.

    Tool arguments that hold a lone surrogate go to `held`, by request id, for the dispatcher.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(PARSE_ERROR, "Parse error: the message is not UTF-8 text", "not json") from None
    else:
        text = data
    given = text
    message = _parsed(text)
    if nested_deeper_than(message, MAX_DEPTH):
        raise _too_deep()
    if isinstance(message, list):
        what = "an empty batch" if not message else "a batch (a JSON array of messages)"
        raise Refused(INVALID_REQUEST, f"Invalid request: {what}; MCP takes one message at a time", "batch")
    if not isinstance(message, dict):
        raise Refused(INVALID_REQUEST, f"Invalid request: a message is an object, not {kind(message)}", "not object")
    id_ = _checked_id(message)
    _check_envelope(message, id_)
    if "\\u" in text and has_surrogate(message):
        arguments = _call_arguments(message, id_)
        if arguments is not None and has_surrogate(arguments):  # the SDK passes the call on; the handler takes them
            held[id_] = arguments
            message["params"]["arguments"] = {}
        message = scrubbed(message)
        text = json.dumps(message, ensure_ascii=False)
    _check_sdk(message, id_)
    return Decoded(text, message, changed=text is not given)


def _call_arguments(message: dict[str, Any], id_: Any) -> dict[str, Any] | None:
    """The arguments of a `tools/call` the SDK will hand to its handler, or None."""
    params = message.get("params")
    if message.get("method") != "tools/call" or id_ is None or not isinstance(params, dict):
        return None
    arguments = params.get("arguments")
    return arguments if isinstance(params.get("name"), str) and isinstance(arguments, dict) else None


def kind(value: Any) -> str:
    """How JSON names `value`'s type, with its article: "an object", "a number"."""
    return _KINDS.get(type(value), "a number")


def _too_deep() -> Refused:
    return Refused(INVALID_REQUEST, f"Invalid request: JSON nested more than {MAX_DEPTH} levels deep", "too deep")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(f"the number {number[:40]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parsed(text: str) -> Any:
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise Refused(PARSE_ERROR, f"Parse error: {exc.msg} at character {exc.pos}", "not json") from None
    except ValueError as exc:  # a number of more digits than Python converts, NaN, 1e999
        raise Refused(PARSE_ERROR, f"Parse error: {exc}", "not json") from None


def _checked_id(message: dict[str, Any]) -> Any:
    """The request's id when it is one a response may carry (a string or a whole number), else None; Refused
    for an id no request may have."""
    if "id" not in message:
        return None
    id_ = message["id"]
    if isinstance(id_, str) and not has_surrogate(id_) or isinstance(id_, int) and not isinstance(id_, bool):
        return id_
    what = "holds a lone surrogate" if isinstance(id_, str) else f"is {kind(id_)}"
    raise Refused(INVALID_REQUEST, f"Invalid request: the id {what}; give a string or a whole number", "bad id")


def _check_envelope(message: dict[str, Any], id_: Any) -> None:
    if message.get("jsonrpc") != "2.0":
        raise Refused(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', "not json-rpc", id_)
    if "method" not in message:
        if id_ is not None and ("result" in message) != ("error" in message):
            return  # a response to a request of the server's
        raise Refused(
            INVALID_REQUEST, "Invalid request: a message needs a method (or, answering, a result or an error)", "shape"
        )
    if not isinstance(message["method"], str):
        raise Refused(
            INVALID_REQUEST, f"Invalid request: the method is {kind(message['method'])}, not a string", "shape", id_
        )
    params = message.get("params", {})
    if isinstance(params, list):
        raise Refused(
            INVALID_PARAMS, "Invalid params: params are an object of named values, not an array", "params", id_
        )
    if not isinstance(params, dict):
        raise Refused(INVALID_REQUEST, f"Invalid request: params are {kind(params)}, not an object", "params", id_)


def _check_sdk(message: dict[str, Any], id_: Any) -> None:
    """What the SDK's own envelope check refuses (it would drop the message without an answer)."""
    import mcp.types as types
    from pydantic import ValidationError

    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"msg": "not a JSON-RPC message"}
        where = ".".join(str(part) for part in first.get("loc", ()))[:80]
        raise Refused(
            INVALID_REQUEST, f"Invalid request: {first['msg']}" + (f" ({where})" if where else ""), "shape", id_
        ) from None


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when `value` nests arrays and objects more than `limit` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def has_surrogate(value: Any) -> bool:
    """Whether a lone surrogate is in `value`, its keys included (callers bound its depth first)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_surrogate(v) for v in value)
    return False


def scrubbed(value: Any) -> Any:
    """`value` with every lone surrogate made U+FFFD (a transcript's records are made storable alike)."""
    from fsmem.hooks.claude_code import replaced_in_strings  # only a message that holds one comes here

    return replaced_in_strings(value, _SURROGATE)
