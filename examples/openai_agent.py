"""An agent loop with the OpenAI SDK: fsmem's tools through function calling.

Usage (needs `pip install openai` and OPENAI_API_KEY):

    python examples/openai_agent.py DEMO_MEMORY "What are Acme's payment terms?"

The loop is the whole integration: pass `fsmem.tools.definitions(memory,
format="openai")` as `tools=`, and hand every tool call the model makes to
`fsmem.tools.call(memory, name, arguments)`; its text goes back as the tool
message. The pre-injected context (profile/ and INDEX.md) opens the system
prompt. CI runs this same loop against a scripted stand-in for the model
(tests/test_tools.py), since it has no network.
"""

from __future__ import annotations

import sys

from fsmem import Memory
from fsmem.agents import tools

SYSTEM = "You answer from the team's shared memory. Cite the memory file you used.\n\n"


def run(client, memory: Memory, question: str, *, model: str = "gpt-4.1-mini", max_turns: int = 12) -> str:
    """Ask `question`; let the model call fsmem's tools until it answers. Returns the answer text."""
    messages = [
        {"role": "system", "content": SYSTEM + memory.context().to_text()},
        {"role": "user", "content": question},
    ]
    definitions = tools.definitions(memory, format="openai")
    for _ in range(max_turns):
        response = client.chat.completions.create(model=model, messages=messages, tools=definitions)
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        for tool_call in message.tool_calls:
            # arguments is the JSON text the model wrote; the dispatcher parses and validates it.
            answer = tools.call(memory, tool_call.function.name, tool_call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": answer.text})
    return "(no answer within the turn limit)"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: openai_agent.py MEMORY_DIR QUESTION")
    from openai import OpenAI

    print(run(OpenAI(), Memory(sys.argv[1], agent="researcher"), sys.argv[2]))


if __name__ == "__main__":
    main()
