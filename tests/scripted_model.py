"""A scripted stand-in for a chat model (CI has no network): fixed tool calls, checked answers.

`ScriptedChatModel` has the shape of the OpenAI client that the example loops
use (`client.chat.completions.create(...)` returning `choices[0].message` with
`tool_calls`). Each step names a tool, its arguments (a dict, or raw JSON text
as a model writes it) and a check run on the text the loop sends back. After
the last step it answers with `final`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any] | str
    check: Callable[[str], None]


@dataclass
class ScriptedChatModel:
    steps: list[Step]
    final: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        turn = len(self.requests)
        self.requests.append({"model": model, "messages": list(messages), "tools": tools})
        if turn > 0:
            call_id = f"call_{turn - 1}"
            replies = [m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == call_id]
            assert len(replies) == 1, f"expected one tool message for {call_id}, got {len(replies)}"
            self.answers.append(replies[0]["content"])
            self.steps[turn - 1].check(replies[0]["content"])
        if turn < len(self.steps):
            step = self.steps[turn]
            arguments = step.arguments if isinstance(step.arguments, str) else json.dumps(step.arguments)
            call = SimpleNamespace(
                id=f"call_{turn}",
                type="function",
                function=SimpleNamespace(name=step.tool, arguments=arguments),
            )
            message = SimpleNamespace(role="assistant", content=None, tool_calls=[call])
        else:
            message = SimpleNamespace(role="assistant", content=self.final, tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])
