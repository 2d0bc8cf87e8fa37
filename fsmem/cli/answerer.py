"""`python -m fsmem.cli.answerer ROOT`: a process that only answers one-shot reads, which `fsmem serve` starts.

It holds the memory's change feed as `fsmem watch` does and answers on the same socket (`fsmem.cli.answering`),
but writes nothing: no INDEX.md, no consolidation. It stops on SIGTERM, SIGINT (during its warm-up too:
`fsmem.cli.stopping`), or at the end of its stdin, the server's end of a pipe, which closes when the server exits
however it exits (`fsmem.server.oneshot`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from fsmem.cli.answering import Answering
from fsmem.cli.stopping import Stopped, StopSignals
from fsmem.names import STATE_DIR


def serve_reads(
    root: str, stop: threading.Event, say: Callable[[str], None], warmed: Callable[[], None] = lambda: None
) -> None:
    """Answer the one-shot reads of the memory at `root` until `stop` is set, holding its change feed as a
    watcher does, but writing nothing (no INDEX.md, no consolidation): what `fsmem serve` runs beside itself.
    `warmed` is called once the memory's caches are caught up, before the socket is made."""
    from fsmem.memory import Memory

    memory = Memory(root)
    try:
        os.mkdir(os.path.join(memory.root, STATE_DIR))  # a memory no command has opened yet: the socket's folder's
    except OSError:
        pass  # there already, or it cannot be made: the socket says why
    answering = Answering(memory.root, say, warmed)
    try:
        memory.catalog.hold_feed()  # every memory a request opens in this process is then fresh without a walk
        answering.open()  # the caches caught up, then the socket
        warmed()  # where no socket is made too
        while not answering.wait(stop, 0.2):  # a signal is seen within this time
            pass
    finally:
        answering.close()
        memory.close()


def main(argv: list[str]) -> int:
    """`python -m fsmem.cli.answerer ROOT`, started by `fsmem serve` (`fsmem.server.oneshot`): answer until
    SIGTERM, SIGINT or the end of stdin (the server's end of the pipe closes when it exits, however it exits);
    what `Answering` says goes to stdout, one line each, for the server's log."""
    from fsmem.errors import FsmemError

    stop = threading.Event()
    signals = StopSignals(stop)

    def until_the_end_of_stdin() -> None:
        # the file descriptor, not sys.stdin: a thread blocked in a buffered read holds its lock, and the
        # interpreter's exit, which closes sys.stdin, would abort waiting for it
        while os.read(0, 1 << 12):
            pass
        os.kill(os.getpid(), signal.SIGTERM)  # as the server's own stop does: a warm-up stops there too

    threading.Thread(target=until_the_end_of_stdin, daemon=True).start()

    def say(message: str) -> None:
        sys.stdout.write(message + "\n")
        sys.stdout.flush()

    try:
        serve_reads(argv[0], stop, say, signals.warm)
    except FsmemError as exc:
        say(f"one-shot commands will walk: {exc}")
        return 2
    except Stopped:
        say(f"stopped by {signals.name()} while warming up")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
