"""The UserPromptSubmit hook: what the memory holds about the prompt, added to it, or nothing at all.

It runs `recall` on the prompt within `search.recall.hook_max_tokens` (the same
budget as any call's `max_tokens`, never more than the agent's own, the text
added fitted whole by `fsmem.budget.within`, its header and trailer included) and the
threshold `search.min_score`: when no row clears the threshold, or recall skips,
the hook prints nothing and the prompt goes to the model as it was, so
pre-injection costs tokens only when it pays. Added context is Claude Code's
documented `{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
"additionalContext": "..."}}` (https://code.claude.com/docs/en/hooks,
"UserPromptSubmit decision control"; the same shape as SessionStart's).

The prompt is untrusted: whatever a person pasted (a megabyte, binary, control
characters, lone surrogates). The command caps what it reads
(`claude_code.STDIN_LIMIT`) and its time (`--timeout`); here the query is cut to
`QUERY_CHARS` and cleaned to text before recall sees it, and the added text
passes through the one printer rule for what reaches a terminal or a model
(`fsmem.cli.printing.visible`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from fsmem.budget import fit_text, within
from fsmem.cli.printing import visible
from fsmem.hooks import claude_code as cc
from fsmem.hooks.runner import Outcome

if TYPE_CHECKING:
    from fsmem.memory import Memory
    from fsmem.search.recall import RecallResult

QUERY_CHARS = 4_000  # recall keeps a query's first terms only (fsmem.search.scoring.first_terms); this is ample
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
HEADER = "Relevant memory (fsmem recall on this prompt):"


def query_of(prompt: str) -> str:
    """The prompt as a recall query: its first `QUERY_CHARS`, valid Unicode, control characters as spaces."""
    cut = prompt[:QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")  # a lone surrogate becomes '?'
    return _NOT_TEXT.sub(" ", cut).strip()


def recall_for_prompt(memory: Memory, event: cc.HookEvent) -> Outcome:
    """The UserPromptSubmit answer: the rows recall finds for the prompt within the hook's budget, else nothing."""
    outcome = Outcome()
    query = query_of(event.prompt or "")
    if not query:
        return outcome
    budget = memory.config.search.recall.hook_max_tokens

    def render(found: RecallResult) -> str:
        return visible(f"{HEADER}\n{found.to_text()}")

    found, block = within(lambda room: memory.recall(query, max_tokens=room), render, memory.tokens.count, budget)
    if found.skipped or found.empty:
        return outcome
    block, _cut = fit_text(memory.tokens.count, memory.tokens.truncate, block, budget)
    answer = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}
    outcome.stdout = json.dumps(answer, ensure_ascii=False)
    return outcome
