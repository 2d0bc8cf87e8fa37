"""Claude's memory tool backed by fsmem, driven by the Anthropic SDK's tool runner.

Needs `pip install 'fsmem[anthropic]'` and ANTHROPIC_API_KEY; it calls the API,
so CI does not run it (tests/test_integrations_anthropic.py covers the same
plumbing against a scripted API).

    python examples/anthropic_memory_tool.py ./claude-memory "I take my coffee black"

The only change from the SDK's own memory-tool example is the import:
`from anthropic.tools import BetaLocalFilesystemMemoryTool` became the fsmem
class below. The fsmem keyword arguments are optional; here the retrieval log
goes beside the memory, and afterwards the same folder is searched with fsmem.
"""

from __future__ import annotations

import os
import sys

from anthropic import Anthropic

from fsmem.integrations.anthropic import FsmemMemoryTool

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")


def main(base_path: str, request: str) -> None:
    memory_tool = FsmemMemoryTool(
        base_path=base_path,
        agent="researcher",  # named in the log; its budget applies once the folder is an fsmem memory
        max_tokens=4000,  # a view of a huge file is cut here, with the next view_range named
        state_dir=os.path.join(base_path, "fsmem-state"),  # logs and locks; outside /memories
    )
    client = Anthropic()
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2048,
        messages=[{"role": "user", "content": request}],
        tools=[memory_tool],
    )
    for message in runner:
        for block in message.content:
            if block.type == "text":
                print(block.text)
            elif block.type == "tool_use":
                print(f"[memory] {block.input}")

    memory = memory_tool.fsmem(init=True)  # fsmem over the same folder: adds fsmem.yaml if missing
    print(memory.ls().to_text())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: anthropic_memory_tool.py BASE_PATH REQUEST")
    main(sys.argv[1], sys.argv[2])
