"""How a command prints: every text it writes passes `visible`, within the token budget, exiting like grep.

A memory's text comes from anyone who can write a file or push a commit, and a
terminal obeys what it is sent: `ESC]52` writes the clipboard, `ESC]0` the
window's title, `ESC[2J` clears the screen, `\x9b` is a CSI on many terminals,
and U+202E shows a line reversed. So the CLI writes nothing but through `echo`,
whose one filter, `visible`, shows every such character as text, as `less` and
`cat -v` do; the output is the same bytes whether or not it goes to a terminal.
A `--json` document is escaped by `json_text`, which keeps its value whole.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from fsmem.memory import Memory

Failure = tuple[str, int, str | None]  # a message, the exit code, and the line shown (None: already shown)

# What a terminal may act on or hide: C0 controls but tab and newline (a CR only before a newline passes),
# DEL, C1 controls, lone surrogates (bytes that were not UTF-8), line and paragraph separators, and the
# invisible format characters: bidirectional embeddings, overrides, isolates and marks, zero-width
# spaces and joiners that join nothing, word joiners, the BOM, interlinear annotations and tag characters.
# ZWNJ and ZWJ (U+200C, U+200D) pass: scripts and emoji need them, and they move nothing.
_HIDDEN = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f"
)
_UNSEEN = re.compile(f"[{_HIDDEN}]|\r(?!\n)")
_ESCAPED_IN_JSON = re.compile(f"[{_HIDDEN}]")  # json.dumps escapes the rest of C0 itself
# An error repeats what was typed (a name, a choice, an option); a word longer than any path or name fsmem writes
# is a value pasted or sent, repeated by its start and its size (`fsmem.budget.echo`), and a message by its first
# MAX_ERROR_CHARS: a 10 kB agent name, choice or option came back whole, as one line of 10 kB
LONG_WORD = 256
_LONG_WORD = re.compile(rf"\S{{{LONG_WORD + 1},}}")
SHOWN_CHARS, MAX_ERROR_CHARS = 60, 2_000


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20 or code == 0x7F:
        return "^" + chr(code ^ 0x40)  # ^[ for ESC, ^M for CR, ^? for DEL: caret notation, as cat -v and less
    if 0xDC80 <= code <= 0xDCFF:
        return f"<{code - 0xDC00:02X}>"  # a byte that was not UTF-8, as less shows it
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every character a terminal would act on, or that hides or reorders text, shown as text.

    Newlines, tabs and CRLF line ends pass; ESC becomes `^[`, U+202E `<U+202E>`.
    """
    return _UNSEEN.sub(_shown, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """`value` as a JSON document in which every character `visible` would show is escaped (`\\u202e`).

    Parsed, it is the same value: the escapes are JSON's own. json.dumps escapes C0, and
    with ensure_ascii=False leaves the rest raw for a terminal to obey.
    """
    return escaped_json(json.dumps(value, ensure_ascii=False, indent=indent))


def escaped_json(text: str) -> str:
    """JSON text (json.dumps(..., ensure_ascii=False)) with every character `visible` would show escaped: the same
    value, parsed; what the server's log lines are written through, since a terminal may show them."""
    return _ESCAPED_IN_JSON.sub(_json_escape, text)


def cut(message: str) -> str:
    """`message` with each word over LONG_WORD characters cut to its start and its size, and the whole to
    MAX_ERROR_CHARS: what an error repeats of its input stays a line or two, whatever was typed."""
    message = _LONG_WORD.sub(lambda word: f"{word[0][:SHOWN_CHARS]}… ({len(word[0]):,} characters)", message)
    if len(message) > MAX_ERROR_CHARS:
        message = f"{message[:MAX_ERROR_CHARS]}… ({len(message):,} characters)"
    return message


def echo(message: str, err: bool = False, nl: bool = True) -> None:
    """Write `message` (and a newline) to stdout or stderr as the CLI writes everything: through `visible`.

    A stream closed before the process started (`>&-`: Python's is None) is written nothing, as print() does. A
    stdout that refuses the answer (a full disk, `>/dev/full`) is named in the error: by then a write command's
    change is stored, and a bare `no space left on device` read as the memory's disk refusing it."""
    stream: IO[str] | None = sys.stderr if err else sys.stdout
    if stream is None:
        return
    try:
        stream.write(visible(message + "\n" if nl else message))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        if err:
            raise
        from fsmem.errors import StorageError, os_error_message

        raise StorageError(f"could not write the answer to standard output: {os_error_message(exc)}") from None


def show_progress(line: str) -> None:
    """Write a line of progress over the last one on stderr ("" clears it): what `fsmem.store.progress` shows
    through, set by `watch_progress` only when stderr is a terminal, so no log or pipe ever holds one."""
    sys.stderr.write(f"\r{visible(line)}\x1b[K" if line else "\r\x1b[K")
    sys.stderr.flush()


def watch_progress() -> None:
    """Show long work's progress (a cold build) on stderr when it is a terminal."""
    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if terminal:
        from fsmem.store import progress

        progress.shower = show_progress


def print_within(
    memory: Memory,
    operation: str,
    max_tokens: int | None,
    ask: Callable[[int | None], Any],
    as_json: bool,
    *,
    empty: Callable[[Any], bool] = lambda result: False,
    reserve: bool = True,
) -> bool:
    """Print the answer of `ask(max_tokens)`; as text, it fits the token budget whole. True: exit 1 (nothing found).

    The budget (the agent's, or less with --max-tokens) caps what is printed,
    the lines that say what was left out and how to go on included, as it does
    for a tool: the content is asked for with room left for them, then asked
    again with less when the text still comes out over (`fsmem.budget.within`),
    and `fit_text` is the last net. An answer that fits its trailer in by
    itself (context, recall) passes `reserve=False`. A JSON document is the
    answer the text shows, fitted the same way: the same rows and continuation; its keys are not counted. `--max-tokens` is held to
    `operation`'s declared limit here, as `Memory` would hold it, since `Memory` is asked with the room it leaves.
    """
    from fsmem.arguments import check_limit

    check_limit(operation, "max_tokens", max_tokens)
    from fsmem.budget import fit_text, within

    budget = memory.budget.narrowed(max_tokens).max_tokens
    result, text = within(ask, lambda answer: answer.to_text(), memory.tokens.count, budget, reserve=reserve)
    if as_json:  # the answer the text would show: the same rows and the same continuation
        return print_answer(result, True, empty=empty(result))
    text, _ = fit_text(memory.tokens.count, memory.tokens.truncate, text, budget)
    echo(text)
    return empty(result)


def print_answer(result: Any, as_json: bool, *, empty: bool = False) -> bool:
    """Print `result`, as JSON or as text; returns `empty` (exit 1 when nothing was found)."""
    if as_json:
        echo(json_text(result.to_dict()))
    else:
        echo(result.to_text())
    return empty


def boundary(
    run: Callable[[], int | None], as_json: bool, *, known: Callable[[Exception], Failure | None] = lambda exc: None
) -> NoReturn:
    """Run a command and exit with its code, turning every error into one line and exit 2: the CLI's one error
    boundary, for click's commands (`fsmem.cli.app.run`) and the lean grep (`fsmem.cli.lean`) alike.

    A library error is its own message; an error from below the library (an OSError, input that is not
    text) is worded as every face words it (`fsmem.errors.translated`); `known` words the errors of the
    command's parser (click's usage errors) as (message, exit code, the line shown, None when it was). With
    --json the error is also a JSON document on stdout, `{"error": {"message": ..., "exit": 2}}`, so a
    caller that parses stdout learns why there is no answer.
    """
    from fsmem.errors import FsmemError, translated

    try:
        code = run()
    except FsmemError as exc:
        fail(str(exc), exc.exit_code, as_json)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        _merges_abandoned()
        fail("interrupted", 130, as_json, line=None)
    except Exception as exc:  # the last resort of the one boundary: still one line, never a traceback
        failure = known(exc)
        if failure is not None:
            message, code, line = failure
            if code == 130:  # click's Abort: a Ctrl-C inside the command
                _merges_abandoned()
            fail(message, code, as_json, line=line)
        error = translated(exc)
        fail(str(error) if error is not None else f"{type(exc).__name__}: {exc}", 2, as_json)
    sys.exit(code if isinstance(code, int) else 0)


def _merges_abandoned() -> None:
    """A Ctrl-C ends the command: a search build's merge running behind its answer is not waited for at exit
    (`fsmem.search.index.abandon_merges`; the index stays `unmerged`, the next command merges it). Only where
    the command loaded the search index: nothing is imported for it."""
    index = sys.modules.get("fsmem.search.index")
    if index is not None:
        index.abandon_merges()


def fail(message: str, code: int, as_json: bool = False, line: str | None = "") -> NoReturn:
    """End a failed command, the boundary's and the watcher's client's (`fsmem.cli.rendezvous`): its line on
    stderr (unless already shown), the JSON error on stdout with --json; each `cut` to a line or two."""
    from fsmem.errors import FsmemError

    message = cut(message)
    line = None if line is None else cut(line)
    try:
        if line is not None:
            echo(line or f"fsmem: error: {message}", err=True)
        if as_json:
            echo(json_error(message, code))
    except (OSError, FsmemError):  # a closed or full stdout or stderr (`echo`): the exit code still says it
        pass
    sys.exit(code)


def json_error(message: str, code: int) -> str:
    """The JSON document a failed command prints on stdout with --json."""
    return json_text({"error": {"message": message, "exit": code}}, indent=None)
