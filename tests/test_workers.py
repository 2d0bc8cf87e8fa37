"""Worker processes of a cold build (fsmem.store.workers): results in the order asked, and the workers never far
ahead of the caller, so a command killed halfway has not parsed much it never wrote."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time

import pytest

from fsmem.errors import WorkerDied
from fsmem.store import workers


def test_the_workers_run_a_bounded_way_ahead_of_the_results_taken(tmp_path, monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    tasks = [str(tmp_path / f"task-{n:04d}") for n in range(400)]  # each task makes its folder (os.mkdir)
    results = workers.mapped(os.mkdir, tasks, workers.PARALLEL_FROM)
    assert next(results) is None
    # an unbounded pool makes every folder within milliseconds: give it two seconds to show it
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and len(os.listdir(tmp_path)) < len(tasks):
        time.sleep(0.05)
    assert len(os.listdir(tmp_path)) <= 2 * workers.AHEAD_TASKS + 1
    assert list(results) == [None] * (len(tasks) - 1)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(t) for t in tasks]


def _collecting(_task: int) -> bool:
    return gc.isenabled()


def test_the_collector_is_off_in_the_workers_and_in_the_caller_while_a_pool_runs(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    assert gc.isenabled()
    results = workers.mapped(_collecting, range(4), workers.PARALLEL_FROM)
    assert next(results) is False  # in a worker
    assert not gc.isenabled()  # in the caller, between two results
    assert list(results) == [False] * 3
    assert gc.isenabled()  # back on when the pool ends
    left = workers.mapped(_collecting, range(4), workers.PARALLEL_FROM)
    next(left)
    left.close()  # a build that stops halfway (an error in the caller)
    assert gc.isenabled()
    gc.disable()
    try:
        assert list(workers.mapped(_collecting, range(2), workers.PARALLEL_FROM)) == [False] * 2
        assert not gc.isenabled()  # left as it was: off
    finally:
        gc.enable()
    small = workers.mapped(_collecting, range(2), workers.PARALLEL_FROM - 1)  # no pool: parsed in the caller
    assert list(small) == [True, True]


def _failing(task: int) -> int:
    if task == 5:
        raise ValueError(f"task {task} failed")
    return task * 2


def _dying(task: int) -> int:
    if task == 5:
        os._exit(3)  # as a worker the kernel kills (out of memory) ends: no result, no exception
    return task


def test_results_come_in_order_and_a_task_s_error_is_raised_in_the_caller(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "3")
    assert list(workers.mapped(_failing, range(5), workers.PARALLEL_FROM)) == [0, 2, 4, 6, 8]
    results = workers.mapped(_failing, range(40), workers.PARALLEL_FROM)
    assert [next(results) for _ in range(5)] == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError, match="task 5 failed"):
        next(results)


def test_a_worker_that_dies_is_an_error_in_the_caller_not_a_wait_for_ever(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    results = workers.mapped(_dying, range(40), workers.PARALLEL_FROM)
    assert [next(results) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(WorkerDied, match="exit code 3"):
        next(results)


def test_a_caller_that_stops_early_leaves_no_worker(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    before = set(multiprocessing.active_children())
    tasks = [0] * (2 * workers.AHEAD_TASKS + 4)  # more than either worker may run ahead: both wait for a credit
    results = workers.mapped(_failing, tasks, workers.PARALLEL_FROM)
    assert next(results) == 0
    started = set(multiprocessing.active_children()) - before
    assert len(started) == 2
    results.close()
    assert all(process.exitcode is not None for process in started)
    assert set(multiprocessing.active_children()) == before


def test_workers_are_spawned_where_the_caller_runs_threads_and_answer_the_same(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)  # a second thread: forking could copy a lock it holds
    thread.start()
    try:
        assert list(workers.mapped(_failing, range(5), workers.PARALLEL_FROM)) == [0, 2, 4, 6, 8]
        assert list(workers.mapped(_collecting, range(3), workers.PARALLEL_FROM)) == [False] * 3
    finally:
        stop.set()
        thread.join()


def test_a_pool_runs_each_task_as_it_is_given_before_the_caller_knows_the_rest(tmp_path, monkeypatch):
    """A build hands its first files to the workers while its walk goes on (fsmem.search.index._ToRead): a task runs
    as soon as it is given, not once every task is known, and no more than AHEAD_TASKS per worker run before their
    results are taken."""
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    with workers.Pool(os.mkdir, workers.count()) as pool:
        pool.put(str(tmp_path / "task-0000"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not os.listdir(tmp_path):
            time.sleep(0.01)
        assert os.listdir(tmp_path) == ["task-0000"]  # ran with the pool still open
        for n in range(1, 400):
            pool.put(str(tmp_path / f"task-{n:04d}"))
        time.sleep(1)  # an unbounded pool makes every folder within it
        assert len(os.listdir(tmp_path)) <= 2 * workers.AHEAD_TASKS
        pool.close()
        assert list(pool.results()) == [None] * 400
    assert len(os.listdir(tmp_path)) == 400


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5", "١", "99999"])
def test_a_worker_count_that_is_no_whole_number_in_range_is_refused(monkeypatch, value):
    """FSMEM_WORKERS read as unset took every core where one was asked for; 99,999 started a process per task."""
    from fsmem.errors import ConfigError

    monkeypatch.setenv(workers.WORKERS_ENV, value)
    with pytest.raises(ConfigError, match=f"FSMEM_WORKERS is {value!r}, not a whole number of worker processes"):
        workers.count()


def test_a_worker_count_in_range_is_taken_and_unset_means_the_cores(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, " 3 ")
    assert workers.count() == 3
    monkeypatch.setenv(workers.WORKERS_ENV, str(workers.MAX_WORKERS))
    assert workers.count() == workers.MAX_WORKERS
    monkeypatch.delenv(workers.WORKERS_ENV)
    assert workers.count() == len(os.sched_getaffinity(0))
