"""The watcher's side of `fsmem.cli.rendezvous`: one-shot reads answered by the process that holds the memory.

`fsmem watch` keeps its memory's change feed, so a read run in its process is fresh without a walk. Between
two looks at the feed (`fsmem.watch`'s poll) the watcher waits on its socket instead of sleeping, and runs
each request as the CLI would have run it there: in the client's working folder, with the client's FSMEM_*
variables (agent, session, host id, the clock), TZ and terminal width, and nothing of its own; what the command
prints is recorded in order and sent back with its exit code. Requests are taken one at a time in the
watcher's own thread, so a request's folder and variables are the whole process's while it runs and nothing
else runs meanwhile; every change finished before the client asked is in the kernel's queue, which the
command's own catch-up drains first. Only commands of `rendezvous.ASKED` (reads) are run, whatever a client
sends. The socket is made safely: a 0700 folder of this user's (never through a link), a lock held for the
watcher's life (a second watcher of the memory leaves the first one answering), bound under a temporary name
and renamed into place once it listens, so a stale socket (its watcher killed) is replaced at once and a
client never finds one that does not listen yet.

The memories a request opens are kept open for the next one (`fsmem.cli.kept_memories`).
"""

from __future__ import annotations

import errno
import gc
import io
import logging
import os
import select
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsmem.cli import rendezvous as rv
from fsmem.cli.kept_memories import Kept
from fsmem.errors import FsmemError
from fsmem.names import STATE_DIR

REQUEST_SECONDS = 2.0  # a client has this long to send its request, and then its GO
_ENVIRONMENT = ("TZ", "COLUMNS", "LINES")  # with every FSMEM_* variable: what a request brings of its own


class Answering:
    """The socket of one watcher: opened at its first wait, closed (and removed) at the end."""

    def __init__(self, root: Path, say: Callable[[str], None], warmed: Callable[[], None] = lambda: None):
        """`warmed` is called once the caches are caught up, before the socket is made and said."""
        self.root = os.path.realpath(root)
        self.say = say
        self.warmed = warmed
        self.path: str | None = None
        self.listener: socket.socket | None = None
        self.answered = 0
        self._identity: tuple[int, int] | None = None  # (device, inode) of the socket file this watcher bound
        self._lock_fd: int | None = None
        self._opened = False
        self.kept = Kept()

    # -- life -----------------------------------------------------------------------------------------------
    def open(self) -> None:
        """Listen on the memory's socket, or say why one-shot commands will walk instead."""
        self._opened = True
        if not hasattr(socket, "AF_UNIX") or not hasattr(os, "getuid"):
            self.say("one-shot commands will walk: no Unix sockets on this platform")
            return
        path = rv.socket_path(self.root)
        if path is None:
            self.say("one-shot commands will walk: no socket path is short enough for this memory")
            return
        self.kept.warm(self.root, self.say)
        self.warmed()
        self._listen_or_say(path)

    def _listen_or_say(self, path: str) -> None:
        try:
            self._listen(path)
        except OSError as exc:
            self.close()
            self.say(f"one-shot commands will walk: cannot make a socket at {path} ({exc.strerror or exc})")
            return
        except _Taken as exc:
            self.close()
            self.say(f"one-shot commands are answered by another process ({exc})")
            return
        self.say(f"answering one-shot reads on {path}")

    def _still_there(self) -> bool:
        """Whether the socket file this watcher bound is still at its path: `rm -rf .fsmem/` (which the docs call
        safe) took it, and every command walked while the watcher went on, listening where no one could ask."""
        assert self.path is not None
        try:
            now = os.lstat(self.path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == self._identity

    def _listen_again(self) -> None:
        """Listen on the memory's socket anew, its lock too (the removed lock no later watcher would see)."""
        path = self.path
        assert path is not None and self.listener is not None
        self.listener.close()
        self.listener, self.path, self._identity = None, None, None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self.say(f"the socket {path} was removed (.fsmem/ deleted?); listening again")
        if os.path.dirname(os.path.dirname(path)) == os.path.join(self.root, STATE_DIR):
            from fsmem.store.files import state_dir

            try:
                state_dir(Path(self.root))  # .fsmem/ made again as every command makes it, never through a link
            except (OSError, FsmemError) as exc:
                self.say(f"one-shot commands will walk: cannot make {STATE_DIR}/ again ({exc})")
                return
        self._listen_or_say(path)

    def _listen(self, path: str) -> None:
        import fcntl  # POSIX only, as the socket is

        folder = os.path.dirname(path)
        _private_folder(folder)
        lock = path[: -len(".sock")] + ".lock"
        self._lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _Taken("another watcher holds this memory's socket") from None
        # the lock is ours: a socket file already there is stale (its watcher died without removing it)
        temporary = os.path.join(folder, f".{os.getpid()}.sock")
        _remove(temporary)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o177)
        try:
            listener.bind(temporary)
        except OSError:
            listener.close()
            raise
        finally:
            os.umask(umask)
        os.chmod(temporary, 0o600)
        listener.listen(16)
        listener.setblocking(False)
        os.rename(temporary, path)
        self.listener, self.path = listener, path
        made = os.lstat(path)
        self._identity = (made.st_dev, made.st_ino)

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        if self.path is not None and self._identity is not None:
            try:
                now = os.lstat(self.path)
                if (now.st_dev, now.st_ino) == self._identity:  # still ours: no later watcher replaced it
                    os.unlink(self.path)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self.kept.close()

    # -- the watcher's wait ----------------------------------------------------------------------------------
    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait up to `seconds` for `stop`, answering the requests that come meanwhile; True once it is set."""
        if not self._opened:
            self.open()
        if self.listener is not None and not self._still_there():
            self._listen_again()
        if self.listener is None:
            return stop.wait(seconds)
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.listener], [], [], left)
            if ready:
                self.take_one()
        return stop.is_set()

    def take_one(self) -> None:
        """Accept one connection and answer it; a client that breaks the protocol is dropped, nothing run."""
        assert self.listener is not None
        try:
            connection, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        try:
            connection.setblocking(True)
            self._answer(connection)
        except (OSError, rv.Unanswered, ValueError, UnicodeError):
            pass
        finally:
            connection.close()

    def _answer(self, connection: socket.socket) -> None:
        uid = rv.peer_uid(connection)
        if uid is not None and uid != os.getuid():
            return  # another user's process: the folder's mode keeps it out, and so does this
        deadline = time.monotonic() + REQUEST_SECONDS
        fields = rv.read_frame(connection, rv.MAX_REQUEST, deadline)
        request = _Request.of(fields)
        if request is None or request.root != self.root or rv.command_of(request.argv)[0] not in rv.ASKED:
            connection.sendall(rv.REFUSED)
            return
        connection.sendall(rv.READY)
        if rv.read_exactly(connection, 1, deadline) != rv.GO:
            return  # the client gave up waiting and runs the command itself
        collecting = gc.isenabled()
        gc.disable()  # the collector waits until the answer is sent: a grep of a name at 100k files makes some
        try:  # 100-300k objects, and a full collection in its middle took 0.2-0.9 s of the answer
            code, printed = request.run(self.kept)
            answer: list[bytes] = [str(code).encode()]
            for stream, text in printed:
                answer += [str(stream).encode(), text.encode("utf-8", "surrogatepass")]
            frame = rv.pack(answer)
            if len(frame) - 4 > rv.MAX_ANSWER:
                frame = rv.pack([])  # malformed on purpose: the client runs the command itself
            rv.send_frame(connection, frame)
        finally:
            if collecting:
                gc.enable()
        self.answered += 1


class _Taken(Exception):
    """Another live watcher answers for this memory."""


class _Request:
    """One client's command line and what its answer depends on besides the memory."""

    def __init__(self, root: str, cwd: str, variables: dict[str, str], argv: list[str]):
        self.root, self.cwd, self.variables, self.argv = root, cwd, variables, argv

    @classmethod
    def of(cls, fields: list[bytes]) -> _Request | None:
        if len(fields) < 4 or fields[0] != rv.identity():  # another protocol, version, install or locale
            return None
        decode = os.fsdecode
        count = int(fields[3])
        if count < 0 or len(fields) < 4 + 2 * count:
            return None
        pairs = fields[4 : 4 + 2 * count]
        variables = {decode(pairs[i]): decode(pairs[i + 1]) for i in range(0, len(pairs), 2)}
        if any(
            not (k.startswith("FSMEM_") or k in _ENVIRONMENT) or "=" in k or "\0" in k + v for k, v in variables.items()
        ):
            return None
        argv = [decode(word) for word in fields[4 + 2 * count :]]
        return cls(decode(fields[1]), decode(fields[2]), variables, argv)

    def run(self, kept: Kept | None = None) -> tuple[int, list[tuple[int, str]]]:
        """Run the command as the client's process would have, and what it printed, in order; with the memories
        of `kept` where it opens one that is kept."""
        from fsmem.cli import dispatch
        from fsmem.store import progress

        saved = {k: v for k, v in os.environ.items() if k.startswith("FSMEM_") or k in _ENVIRONMENT}
        try:
            here = os.getcwd()
        except FileNotFoundError:  # the folder the watcher started in was removed since: it goes back to the root's
            here = self.root
        streams = sys.stdin, sys.stdout, sys.stderr
        recorder = _Recorder()
        try:
            _set_environment(saved, self.variables)
            os.chdir(self.cwd)
            command, root = rv.command_and_root(self.argv)
            if command not in rv.ASKED or root != self.root:
                raise rv.Unanswered("not a read of this memory")
            sys.stdin, sys.stdout, sys.stderr = io.StringIO(), recorder.stream(1), recorder.stream(2)
            last_resort = _log_to(streams[2])  # the watcher's warnings (the feed's) stay in its own log
            # no progress in an answer: the watcher's own terminal set it, the client's stderr may be a file, and
            # a line drawn over itself would reach the client at once with the answer anyway
            shower, progress.shower = progress.shower, None
            rv.KEEPER = kept
            try:
                dispatch(self.argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                rv.KEEPER = None
                progress.shower = shower
                _log_to(last_resort)
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
            os.chdir(here)
            _set_environment(self.variables, saved)
        return code, recorder.printed


def _log_to(target: Any) -> Any:
    """Point logging's handler of last resort (what an unconfigured logger's warning goes to) at `target`, a
    stream or the handler it was; the one it replaces. Without it a warning during a command would land in
    the client's stderr, where the walk prints none."""
    before = logging.lastResort
    if target is None or isinstance(target, logging.Handler):
        logging.lastResort = target
    else:
        handler = logging.StreamHandler(target)
        handler.setLevel(logging.WARNING)
        logging.lastResort = handler
    return before


def _set_environment(old: dict[str, str], new: dict[str, str]) -> None:
    tz = os.environ.get("TZ")
    for name in old:
        os.environ.pop(name, None)
    os.environ.update(new)
    if os.environ.get("TZ") != tz:
        time.tzset()


class _Recorder:
    """What a command printed on stdout (1) and stderr (2), in the order it printed it."""

    def __init__(self) -> None:
        self.printed: list[tuple[int, str]] = []

    def stream(self, number: int) -> io.StringIO:
        return _Recorded(self.printed, number)


class _Recorded(io.StringIO):
    """One stream of a `_Recorder`: what is written to it joins the record (one class for every request: a class
    made per stream cost more than the rest of a request's setting up)."""

    def __init__(self, printed: list[tuple[int, str]], number: int) -> None:
        super().__init__()
        self.printed, self.number = printed, number

    def write(self, text: str) -> int:
        printed, number = self.printed, self.number
        if printed and printed[-1][0] == number:
            printed[-1] = (number, printed[-1][1] + text)
        else:
            printed.append((number, text))
        return len(text)


def _private_folder(folder: str) -> None:
    """Make `folder` (its parent must exist) this user's alone, mode 0700; refuse a link or anyone else's."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise OSError(errno.EPERM, f"{folder} is not a folder of this user's")
    if found.st_mode & 0o077:
        os.chmod(folder, 0o700)  # a folder, not a link: checked just above
    if not rv.private(folder):
        raise OSError(errno.EPERM, f"{folder} is open to other users")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
