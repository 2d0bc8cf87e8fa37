"""Host-local settings: what names this host or runs a command here, kept where no clone or remote reaches.

A setting that names this host (`notes.host_id`) or runs a program (`distill.command`) belongs to this host's
operator alone. `fsmem.yaml` travels with the memory (sync carries it, a clone brings it), so a remote that
could name a command there would run code on every host and read every episode. These settings are kept
as git keeps merge and textconv drivers: in the repository's own `.git/config` (`git config --local
fsmem.<key>`), which git never sends to a remote nor takes from one, for a memory that lies in a git work
tree; otherwise in `.fsmem/host-settings.json`, which no sync, import or write of fsmem ever carries (a
remote's change under `.fsmem/` is refused). Which of the two is decided by the `.git` above the root alone,
never by fsmem.yaml, so a remote cannot move where they are read from. git's config is kept for the first
because it is where `fsmem.hostId` and `fsmem.acceptConfig` have always been, and it outlives a deleted
`.fsmem/` (which is otherwise safe to delete).

A memory handed over as a tarball or a copied folder brings its `.git/config` and `.fsmem/` too, so a setting
that runs a program (`SEALED`) is taken only with the seal `put` wrote beside it: a keyed hash of the folder,
the name and the value, under a key kept in this user's own config folder (`host_key`), which no memory holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from fsmem.errors import HistoryError, InvalidArgument
from fsmem.history import git_marker, host_setting, local_config
from fsmem.state_files import read_state
from fsmem.store import host
from fsmem.store.files import atomic_write, state_dir
from fsmem.store.paths import STATE_DIR

# each setting's name (as `fsmem config --local` spells it) -> its key in git's config
KEYS = {
    "notes.host_id": "fsmem.hostId",
    "distill.command": "fsmem.distillCommand",
    "distill.timeout": "fsmem.distillTimeout",
    "sync.accept_config": "fsmem.acceptConfig",
}
SAYS = {
    "notes.host_id": "this copy's id in default note names (else derived from the machine's id and the path)",
    "distill.command": "the command fsmem distill runs on each episode when --command is not given",
    "distill.timeout": "seconds fsmem distill gives the command per episode when --timeout is not given",
    "sync.accept_config": "'settings': take a remote's fsmem.yaml change that touches no security setting",
}
# settings that run a program, and where each one's seal is kept in git's config
SEALED = {"distill.command": "fsmem.distillCommandSeal"}
FILE = "host-settings.json"  # under .fsmem/, for a memory outside any git work tree
MAX_VALUE_CHARS = 4096
MAX_TIMEOUT = 3600.0  # seconds: distill.timeout's most, fsmem.operations.command.MAX_TIMEOUT (a higher layer)


def where(root: Path) -> str:
    """Where this memory's host-local settings are kept, in words."""
    if git_marker(root) is not None:
        return "this repository's .git/config (git config --local fsmem.*)"
    return f"{STATE_DIR}/{FILE}"


def _known(name: str) -> str:
    if name not in KEYS:
        raise InvalidArgument(f"no host-local setting {name!r}; the settings are: {', '.join(KEYS)}")
    return KEYS[name]


def get(root: Path, name: str) -> str | None:
    """The value of host-local setting `name` on this host, or None when it is not set."""
    key = _known(name)
    if git_marker(root) is not None:
        return host_setting(root, key)
    value = _read_file(root).get(name)
    return value if isinstance(value, str) and value else None


def every(root: Path) -> dict[str, str]:
    """Every host-local setting that is set, by name."""
    found = {name: get(root, name) for name in KEYS}
    return {name: value for name, value in found.items() if value is not None}


def put(root: Path, name: str, value: str | None) -> None:
    """Set host-local setting `name` to `value` on this host (None: unset it)."""
    key = _known(name)
    if value is not None and (not value.strip() or "\n" in value or "\x00" in value or len(value) > MAX_VALUE_CHARS):
        raise InvalidArgument(f"{name} takes one line of text (at most {MAX_VALUE_CHARS} characters)")
    if name == "notes.host_id" and value is not None and not host.HOST_ID.fullmatch(value):
        raise InvalidArgument(f"{name} may hold only {host.HOST_ID_RULE}")
    if name == "distill.timeout" and value is not None and not _seconds(value):
        raise InvalidArgument(f"{name} takes a number of seconds above 0 and at most {MAX_TIMEOUT:g}")
    if name in SEALED:
        _put(root, SEALED[name], f"{name}.seal", None if value is None else _seal(root, name, value))
    _put(root, key, name, value)


def _seconds(value: str) -> bool:
    """Whether `value` is a timeout distill takes: seconds above 0, at most MAX_TIMEOUT."""
    try:
        return 0 < float(value) <= MAX_TIMEOUT
    except ValueError:
        return False


def sealed(root: Path, name: str) -> str | None:
    """The value of setting `name` that runs a program, or None when it is not set; refused when it was not set
    by `put` for this folder on this host (a copied or received memory's own)."""
    value = get(root, name)
    if value is None:
        return None
    if git_marker(root) is not None:
        seal = host_setting(root, SEALED[name]) or ""
    else:
        found = _read_file(root).get(f"{name}.seal")
        seal = found if isinstance(found, str) else ""
    if not hmac.compare_digest(seal, _seal(root, name, value)):
        raise InvalidArgument(
            f"{name} in {where(root)} was not set on this host for this folder (a memory copied or received "
            f"from someone else brings its own), so it is not run; see it with: fsmem config --local {name}; "
            f"set this host's own with: fsmem config --local {name} CMD"
        )
    return value


def _seal(root: Path, name: str, value: str) -> str:
    said = "\0".join((os.path.realpath(root), name, value)).encode("utf-8", "surrogateescape")
    return hmac.new(host_key(), said, hashlib.sha256).hexdigest()


def host_key() -> bytes:
    """This user's key for seals: $XDG_CONFIG_HOME/fsmem/host-key (else ~/.config/), made on first use."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = Path(config, "fsmem", "host-key")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.path.lexists(path):
            _make_key(path)
        key = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError as exc:
        raise InvalidArgument(f"cannot make or read this user's key for host settings {path}: {exc}") from None
    if len(key) < 32 or not key.isascii():
        raise InvalidArgument(f"{path} holds no key (delete it: the next fsmem config --local makes one)")
    return key.encode("ascii")


def _make_key(path: Path) -> None:
    """Write a new key whole, then give it its name (`link`, which never replaces a key another process made
    meanwhile): a process killed or a disk full while it writes leaves no empty key at that name, which every
    later command would refuse until a person deleted it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            data = (secrets.token_hex(32) + "\n").encode("ascii")
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: looked at, then renamed
            if not os.path.lexists(path):
                os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _put(root: Path, key: str, name: str, value: str | None) -> None:
    args = ["--unset-all", key] if value is None else ["--replace-all", key, value]  # a copied config may hold two
    proc = local_config(root, *args)
    if proc is not None:
        if proc.returncode not in (0, 5):  # 5: --unset of a key that is not set
            raise HistoryError(f"git config {key} failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
        return
    kept = _read_file(root)
    if value is None:
        kept.pop(name, None)
    else:
        kept[name] = value
    data = (json.dumps(kept, indent=2, sort_keys=True) + "\n").encode("utf-8")
    atomic_write(state_dir(root) / FILE, data, root=root, generated=True)


def _read_file(root: Path) -> dict[str, object]:
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(read_state(Path(root, STATE_DIR, FILE)).decode("utf-8"))
        if isinstance(found, dict):
            return found
    return {}


def shared_host_id(value: str) -> tuple[str, int, str]:
    """`notes.host_id` in fsmem.yaml, which fsmem check reports: every host would read one id (and a remote could
    set it), so it is not read; this host's id is host-local."""
    from fsmem.store.paths import shown

    return (
        "fsmem.yaml",
        1,
        f"notes.host_id in fsmem.yaml is not read (every copy shares fsmem.yaml, and a remote could name every "
        f"host {shown(value)}); set this host's own id with: fsmem config --local notes.host_id ID",
    )
