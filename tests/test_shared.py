"""`fsmem.store.shared.Shared`: one instance per key while it has users, made once, closed once by its last."""

from __future__ import annotations

import threading

from fsmem.store.shared import Shared


class Thing:
    made = 0

    def __init__(self, key: str):
        self.key, self.users, self.closed = key, 0, 0
        Thing.made += 1

    def close(self) -> None:
        self.closed += 1


def test_users_of_a_key_share_one_instance_and_the_last_closes_it():
    shared: Shared[str, Thing] = Shared()
    first = shared.take("a", lambda: Thing("a"))
    second = shared.take("a", lambda: Thing("a"))
    other = shared.take("b", lambda: Thing("b"))
    assert first is second and other is not first and first.users == 2
    shared.give_back("a", first)
    assert first.closed == 0 and shared.get("a") is first
    shared.give_back("a", second)
    assert first.closed == 1 and shared.get("a") is None and shared.snapshot() == {"b": other}
    again = shared.take("a", lambda: Thing("a"))
    assert again is not first and again.users == 1  # a new one once the last gave it back


def test_a_forgotten_instance_is_closed_by_whoever_forgot_it_and_its_key_starts_anew():
    shared: Shared[str, Thing] = Shared()
    held = shared.take("a", lambda: Thing("a"))
    assert shared.forget("a") is held and not shared and held.closed == 0
    fresh = shared.take("a", lambda: Thing("a"))
    shared.give_back("a", held)  # the forgotten one's last user: closed, and the new one left alone
    assert held.closed == 1 and shared.get("a") is fresh and fresh.closed == 0


def test_threads_taking_and_giving_back_close_each_instance_once():
    shared: Shared[str, Thing] = Shared()
    seen: list[Thing] = []
    lock = threading.Lock()

    def user(index: int) -> None:
        for round in range(300):
            key = "abc"[(index + round) % 3]
            found = shared.take(key, lambda key=key: Thing(key))
            with lock:
                seen.append(found)
            assert found.closed == 0  # never handed out once closed
            shared.give_back(key, found)

    threads = [threading.Thread(target=user, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not shared
    assert all(thing.closed == 1 and thing.users == 0 for thing in set(seen))


def test_a_give_back_by_a_finalizer_inside_take_is_done_once_take_is_out():
    """The collector runs finalizers wherever it runs, in the middle of `take` too (a dict lookup allocates): a
    memory's finalizer giving its feed back there waited for `take`'s lock for ever (a test process hung)."""
    import gc
    import weakref

    shared: Shared[str, Thing] = Shared()
    held = shared.take("a", lambda: Thing("a"))

    class Holder:
        pass

    holder = Holder()
    holder.me = holder  # type: ignore[attr-defined]  # a cycle: only the collector frees it
    weakref.finalize(holder, shared.give_back, "a", held)
    del holder

    def make() -> Thing:
        gc.collect()  # the collector, inside the registry
        return Thing("b")

    taken: list[Thing] = []
    thread = threading.Thread(target=lambda: taken.append(shared.take("b", make)), daemon=True)
    thread.start()
    thread.join(10)
    assert taken, "take waited for itself"
    assert held.closed == 1 and shared.get("a") is None and shared.get("b") is taken[0]
