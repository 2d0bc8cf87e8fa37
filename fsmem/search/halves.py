"""A question's work shared by two threads: its own and the process's one helper thread.

The row part of a question at 100k files seeks a few hundred files with FTS5, and SQLite does it with the GIL
released (apsw), so on a machine with a core free two threads taking the files' runs in turn take about half the
wall time of one. The helper's share runs on a second connection of the asking thread's own
(`SearchIndex.partner`), which no other thread uses: its thread waits for it. The helper is one thread for the
process, made at the first split; a share it has not started when the asking thread finishes (another question
holds it) is taken back, so no question waits for another's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fsmem.store import cache as _cache

R = TypeVar("R")

_helper: ThreadPoolExecutor | None = None
_helper_pid = 0
_made = threading.Lock()


def _helper_thread() -> ThreadPoolExecutor:
    """The process's helper thread, made again in a forked child (which inherits the pool, not its thread)."""
    global _helper, _helper_pid
    with _made:
        if _helper is None or _helper_pid != os.getpid():
            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsmem-search-half")
            _helper_pid = os.getpid()
        return _helper


def in_two(mine: Callable[[], R], theirs: Callable[[], R | None]) -> tuple[R, R | None]:
    """(mine(), theirs()), `theirs` on the helper thread while this thread runs `mine`; None for `theirs` when
    the helper had not started it by then (the caller's share took the work)."""
    future = _helper_thread().submit(theirs)
    try:
        found = mine()
    except BaseException:
        if not future.cancel():
            future.exception()  # its connection is this thread's: never left to the helper after we return
        raise
    if future.cancel():
        return found, None
    return found, future.result()


def same_state(conn, sql: str, state: list[Any], action: Callable[[], R]) -> R | None:
    """`action()` in a read transaction of `conn`, if `sql` reads `state` there (what the asking connection's
    transaction reads); else None: a write landed between the two transactions' starts."""
    return _cache.read_transaction(conn, lambda conn: action() if conn.execute(sql).fetchall() == state else None)
