"""fsmem.cli.stopping: a stop signal's handler takes no lock, since the main thread it runs in may hold one."""

from __future__ import annotations

import signal
import threading

from fsmem.cli.stopping import StopSignals


def test_a_signal_landing_inside_the_stop_events_own_lock_neither_waits_nor_is_lost():
    """A handler runs in the main thread between two of its steps, and `Event.wait` holds the event's lock around
    its wait: a handler that called `stop.set()` there waited for that lock for ever. An answerer of `fsmem serve`
    hung so, in a futex with no timeout, after its server's stop and the end of its stdin each sent it SIGTERM.
    Here the handler runs while its thread holds the event's lock (the stdlib's `Event._cond`), as it does there."""
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    try:
        signals = StopSignals(stop)
        signals.warm()  # steady state: the handler only asks for the stop
        returned = threading.Event()

        def signalled_inside_the_lock() -> None:
            with stop._cond:  # type: ignore[attr-defined]
                signals._asked(signal.SIGTERM, None)
            returned.set()

        threading.Thread(target=signalled_inside_the_lock, daemon=True).start()
        assert returned.wait(10), "the handler waited for the lock its own thread holds"
        assert stop.wait(10) and signals.name() == "SIGTERM"
        signals._asked(signal.SIGINT, None)  # a second signal, after the first set the stop: nothing changes
        assert stop.is_set() and signals.name() == "SIGTERM"
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
