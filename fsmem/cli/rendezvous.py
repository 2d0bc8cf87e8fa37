"""A one-shot read asks a running `fsmem watch` over a local socket, as git's fsmonitor asks Watchman.

A one-shot `fsmem ls` or `search` at 100k files walks 100,000 files for its freshness (docs/performance.md,
"Start-up and one-shot commands"); a watcher that holds the memory already knows what changed. So before
anything else is imported, `ask` sends the command line, with everything its answer depends on (the working
folder, the FSMEM_* variables: agent, session, host, clock; TZ and the terminal's width; its `identity`: fsmem's
version and install, the file name encoding), to the watcher of the memory, which runs the very same command in
its process (`fsmem.cli.answering`) and sends back what it printed and its exit code; the client prints those
bytes and exits. Only reads are asked (`ASKED`); anything
else, and every failure before the answer has arrived (no watcher, one that does not say READY within
`READY_SECONDS`, a refusal, an answer cut short), runs the command here as before: nothing has been printed
by then.

Who can reach it: the socket lives in a folder of its own, mode 0700, owned by the user (`.fsmem/run/`,
or, where that path is longer than a socket's address can be, a folder keyed by a hash of the root under
$XDG_RUNTIME_DIR or /tmp), the socket itself 0600; each side checks the other's uid (SO_PEERCRED where
the platform has it), so a process of another user can neither ask nor answer. The frames are bounded:
`MAX_REQUEST` and `MAX_ANSWER` bytes, each read against a deadline.

This module is imported on every CLI start, so it imports only `os`, `sys` and `_socket` (the `socket`
module pulls in enum and selectors, which every command would pay for).
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from fsmem.names import STATE_DIR, find_root

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any, NoReturn

ASKED = frozenset({"ls", "grep", "search", "read", "context", "links", "stats"})  # reads, answered alike anywhere
MODE_ENV = "FSMEM_SOCKET"  # "off": never ask; "require": fail (exit 2) rather than walk; unset: ask, else walk
RUN_DIR = "run"  # under .fsmem/
SOCKET_NAME = "answers.sock"
MAGIC = b"FSMEM-ASK-2\n"  # then the asking process's `identity`
READY, REFUSED, GO = b"R", b"N", b"G"
MAX_REQUEST = 1 << 20  # a command line, its folder and its variables
MAX_ANSWER = 64 << 20  # what a command printed: every answer is within its token budget, far below this
READY_SECONDS = 0.5  # a watcher that does not take the request in this time (stopped, busy) is walked past
ANSWER_SECONDS = 120.0  # once it has said READY, how long its answer may take before the command runs here
SEND_SECONDS = 2.0  # a client that takes none of its answer for this long (stopped, suspended) is dropped
# sun_path: 108 bytes on Linux, 104 on the BSDs and macOS, the terminating NUL included
MAX_SOCKET_PATH = (108 if sys.platform.startswith("linux") else 104) - 1
_GLOBAL_VALUES = ("--root", "--agent")  # the group's options, before or after the command
# while a process answers a request (`fsmem.cli.answering`): its `kept_memories.Kept`, which the command opens
KEEPER: Any = None


class Unanswered(Exception):
    """The watcher could not answer this time (the command then runs here)."""


# -- where the socket is --------------------------------------------------------------------------------------
def socket_path(root: str) -> str | None:
    """The socket of the memory at `root` (a real path): `.fsmem/run/answers.sock`, or where that is too long for
    a socket's address, `<runtime folder>/<hash of the root>.sock`; None where neither fits."""
    primary = os.path.join(root, STATE_DIR, RUN_DIR, SOCKET_NAME)
    if len(os.fsencode(primary)) <= MAX_SOCKET_PATH:
        return primary
    folder = short_folder()
    if folder is None:
        return None
    import hashlib  # only for a root whose own path is too long

    key = hashlib.sha256(os.fsencode(root)).hexdigest()[:32]
    path = os.path.join(folder, key + ".sock")
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def short_folder() -> str | None:
    """The folder for sockets whose memory's path is too long: $XDG_RUNTIME_DIR/fsmem where that is the user's
    own private folder (systemd makes it so), else /tmp/fsmem-UID."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and private(runtime):
        return os.path.join(runtime, "fsmem")
    return os.path.join("/tmp", f"fsmem-{os.getuid()}")


def private(folder: str) -> bool:
    """True when `folder` is a real folder (not a link) of this user's that no one else may enter or change."""
    try:
        stat = os.lstat(folder)
    except OSError:
        return False
    return (stat.st_mode & 0o170000) == 0o040000 and stat.st_uid == os.getuid() and not stat.st_mode & 0o077


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED), or None where the platform does not say."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(raw[4:8], sys.byteorder)


# -- frames ---------------------------------------------------------------------------------------------------
def pack(fields: list[bytes]) -> bytes:
    """Fields as one frame: a 4-byte length, then each field with its own 4-byte length."""
    body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    return len(body).to_bytes(4, "big") + body


def unpack(body: bytes) -> list[bytes]:
    fields, at = [], 0
    while at < len(body):
        size = int.from_bytes(body[at : at + 4], "big")
        if at + 4 + size > len(body):
            raise Unanswered("a field runs past its frame")
        fields.append(body[at + 4 : at + 4 + size])
        at += 4 + size
    return fields


def read_exactly(sock: _socket.socket, size: int, deadline: float | None = None) -> bytes:
    """`size` bytes from `sock`; with `deadline` (time.monotonic()), all of them by then."""
    chunks, left = [], size
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unanswered("too slow")
            sock.settimeout(remaining)
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise Unanswered("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: _socket.socket, limit: int, deadline: float | None = None) -> list[bytes]:
    size = int.from_bytes(read_exactly(sock, 4, deadline), "big")
    if size > limit:
        raise Unanswered(f"a frame of {size} bytes (at most {limit})")
    return unpack(read_exactly(sock, size, deadline))


def send_frame(sock: _socket.socket, frame: bytes) -> None:
    """Send `frame` (an answer) to a client that keeps taking it: one that takes nothing for `SEND_SECONDS` (Ctrl-Z,
    SIGSTOP) is dropped, and walks when it goes on, its answer cut short. sendall's one timeout held the watcher,
    and every command behind it, for `ANSWER_SECONDS` once the answer was past the socket's buffer."""
    deadline = time.monotonic() + ANSWER_SECONDS
    view = memoryview(frame)
    while view:
        sock.settimeout(max(0.001, min(SEND_SECONDS, deadline - time.monotonic())))
        view = view[sock.send(view[: 1 << 20]) :]


def open_memory(given: str | None, agent: str | None) -> Any:
    """The memory a command opens (`Memory(given, agent=agent)`), kept open between the requests of a process
    that answers them (`KEEPER`); a command closes it only where `closes` says so."""
    if KEEPER is not None:
        return KEEPER.open(given, agent)
    from fsmem.memory import Memory

    return Memory(given, agent=agent)


def closes(memory: Any) -> bool:
    """Whether the command that opened `memory` (`open_memory`) closes it at its end: not a kept one."""
    return KEEPER is None or not KEEPER.holds(memory)


# -- the client ----------------------------------------------------------------------------------------------
def ask(argv: list[str]) -> None:
    """Print the answer of the watcher of this memory to `argv` and exit with its code; return (having printed
    nothing) where the command must run here: not a read, no watcher, or one that did not answer."""
    mode = os.environ.get(MODE_ENV, "")
    if mode == "off" or not argv or not hasattr(_socket, "AF_UNIX") or not hasattr(os, "getuid"):
        return  # Windows: no owner-only Unix socket to ask
    command, root = command_and_root(argv)
    if command not in ASKED:
        return None  # a write, or a line for click to read: always here (a hook's exit 2 would block its agent)
    if mode not in ("", "require"):  # "OFF", "0", "no": what was meant is not for fsmem to guess
        from fsmem.budget import echo

        takes = "it takes off (never ask a running fsmem) or require (fail rather than walk), or is unset"
        _fail(f"{MODE_ENV} is {echo(mode)}; {takes} (ask, else walk)", 2, argv)
    if root is None:
        return _walk(mode, "no memory found", argv)
    path = socket_path(root)
    if path is None or not private(os.path.dirname(path)):
        return _walk(mode, "no socket for this memory", argv)
    try:
        answer = _exchange(path, root, argv)
    except (OSError, Unanswered, ValueError) as exc:
        return _walk(mode, str(exc) or type(exc).__name__, argv)
    except KeyboardInterrupt:  # as the error boundary ends an interrupted command (fsmem.cli.printing.boundary)
        _fail("interrupted", 130, argv, shown=False)
    _print(answer, argv)


def _walk(mode: str, why: str, argv: list[str]) -> None:
    if mode == "require":
        _fail(f"no running fsmem answered ({why}); {MODE_ENV}=require", 2, argv)


def _fail(message: str, code: int, argv: list[str], *, shown: bool = True) -> NoReturn:
    """End as the error boundary ends a failed command (`fsmem.cli.printing.fail`): its line on stderr (unless
    `shown` already), and with --json its JSON document on stdout."""
    from fsmem.cli.printing import fail

    fail(message, code, "--json" in argv[: argv.index("--") if "--" in argv else len(argv)], line="" if shown else None)


def command_and_root(argv: list[str]) -> tuple[str | None, str | None]:
    """The command `argv` names (`command_of`) and the memory root it would open (a real path), as
    `fsmem.store.root` finds it from --root, $FSMEM_ROOT or the working folder."""
    command, root = command_of(argv)
    return command, find_root(root) if command is not None else None


def command_of(argv: list[str]) -> tuple[str | None, str | None]:
    """The command `argv` names and its --root; None where the line is not one to ask (help, `-`, an option
    before the command that is not --root or --agent)."""
    command, root, words = None, None, iter(argv)
    for word in words:
        if word == "--":
            break
        if word in ("-h", "--help", "-"):
            return None, None
        name, equals, value = word.partition("=")
        if name in _GLOBAL_VALUES:
            if not equals:
                value = next(words, "")
            if name == "--root":
                root = value
            continue
        if command is None:
            if word.startswith("-"):
                return None, None
            command = word
    return command, root


def request(root: str, argv: list[str]) -> list[bytes]:
    """What the answer depends on besides the memory: the root, the working folder, the command line, the
    FSMEM_* variables (agent, session, host id, the clock's FSMEM_NOW), TZ and the terminal's width."""
    variables = {k: v for k, v in os.environ.items() if k.startswith("FSMEM_") and k != MODE_ENV}
    for name in ("TZ", "COLUMNS", "LINES"):
        if name in os.environ:
            variables[name] = os.environ[name]
    if "COLUMNS" not in variables:  # what shutil.get_terminal_size (click's usage lines) reads here
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
            variables["COLUMNS"], variables["LINES"] = str(size.columns), str(size.lines)
        except (AttributeError, ValueError, OSError):
            variables["COLUMNS"], variables["LINES"] = "80", "24"
    encode = os.fsencode
    fields = [identity(), encode(root), encode(os.getcwd()), str(len(variables)).encode()]
    for name, value in sorted(variables.items()):
        fields += [encode(name), encode(value)]
    return fields + [encode(word) for word in argv]


def identity() -> bytes:
    """The protocol and what an answer depends on of the process that runs the command: fsmem's version, where its
    code is, and the file system's encoding (how the bytes of arguments and file names become text). A watcher
    answers a client of its own identity only: one started before an upgrade, from another install, or under a
    locale whose names decode otherwise (PYTHONUTF8=0 LC_ALL=C: ASCII) would print what the walk would not."""
    package = sys.modules["fsmem"]
    code = os.path.dirname(package.__file__ or "")
    encoding = f"{sys.getfilesystemencoding()}:{sys.getfilesystemencodeerrors()}"
    return MAGIC + os.fsencode(f"{package.__version__} {encoding} {code}")


def _exchange(path: str, root: str, argv: list[str]) -> tuple[int, list[tuple[int, str]]]:
    """Ask the watcher at `path`; its exit code and what it printed, in order ((1 or 2, text), ...)."""
    frame = pack(request(root, argv))
    if len(frame) > MAX_REQUEST:
        raise Unanswered("the command line is too long to ask")
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(READY_SECONDS)
        sock.connect(path)  # a stale socket (its watcher killed): ECONNREFUSED at once
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            raise Unanswered("the socket is another user's")
        sock.sendall(frame)
        said = read_exactly(sock, 1, time.monotonic() + READY_SECONDS)
        if said != READY:
            raise Unanswered("the watcher refused")
        sock.sendall(GO)  # from here the command runs there, and only there
        fields = read_frame(sock, MAX_ANSWER, time.monotonic() + ANSWER_SECONDS)
    finally:
        sock.close()
    if len(fields) < 1 or len(fields) % 2 != 1:
        raise Unanswered("a malformed answer")
    code = int(fields[0])
    printed = [(int(fields[i]), fields[i + 1].decode("utf-8", "surrogatepass")) for i in range(1, len(fields), 2)]
    for stream, text in printed:  # what this process's streams could not write, the walk words as an error
        out = sys.stderr if stream == 2 else sys.stdout
        text.encode(getattr(out, "encoding", None) or "utf-8", getattr(out, "errors", None) or "strict")
    return code, printed


def _print(answer: tuple[int, list[tuple[int, str]]], argv: list[str]) -> NoReturn:
    """Write what the command printed there, in its order, through this process's own streams, and exit at once.

    Nothing is left to end once the streams are flushed: the socket is closed, nothing this process imported
    registered an exit function, and the memory was the watcher's. The interpreter's finalization (every
    module's objects freed, one by one) would take about an eighth of `fsmem --version`'s whole run, after the
    answer is printed and before the shell sees the command end, so the process leaves without it.
    """
    code, printed = answer
    try:
        for stream, text in printed:
            out = sys.stderr if stream == 2 else sys.stdout
            if out is None:  # closed before the process started: written nothing, as the walk's echo writes it
                continue
            out.write(text)
            out.flush()
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except OSError as exc:  # a stdout that refuses the answer: worded as the walk's echo words it
        from fsmem.errors import os_error_message

        _fail(f"could not write the answer to standard output: {os_error_message(exc)}", 2, argv)
    os._exit(code & 0xFF)  # as the kernel keeps it of sys.exit(code)
