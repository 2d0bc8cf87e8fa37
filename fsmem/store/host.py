"""This copy of a memory's host id: what makes default session note names unique to the host that writes them.

It must stay the same from run to run on every operating system, and differ
for two copies of one memory, even on one machine. The machine's own id is
read where the system keeps one cheaply (systemd's machine-id on Linux, the
MachineGuid in the registry on Windows); elsewhere (macOS, where the hostname
changes with the network) a random id is drawn once and kept in `.fsmem/`.
Either is mixed with the memory's absolute path.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path

from fsmem.errors import ConfigError, FsmemError
from fsmem.state_files import read_state
from fsmem.store.files import atomic_write
from fsmem.store.paths import STATE_DIR

HOST_ID_ENV = "FSMEM_HOST_ID"
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
KEPT_ID = "host-id"  # under .fsmem/, where no machine id can be read
# what a session note's name may hold (`fsmem.store.writing`), in a part short enough to leave the agent's name room
HOST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
HOST_ID_RULE = "letters, digits, '.', '_' and '-' (at most 64 characters)"


def host_id(root: Path, configured: str | None = None) -> str:
    """$FSMEM_HOST_ID, else this host's `notes.host_id`, else 8 hex digits of the machine's id and the root's path.

    A chosen id that no note name may hold (`../x`) is refused naming where it was chosen: it was refused later,
    as the "session id" of every note the agent wrote."""
    import hashlib

    chosen = os.environ.get(HOST_ID_ENV) or configured
    if chosen:
        if not HOST_ID.fullmatch(chosen):
            from fsmem.budget import echo

            named = HOST_ID_ENV if os.environ.get(HOST_ID_ENV) else "notes.host_id (fsmem config --local)"
            raise ConfigError(f"{named} is {echo(chosen)}; a host id may hold only {HOST_ID_RULE}")
        return str(chosen)
    seed = f"{machine_id() or kept_id(root)}\0{os.path.realpath(root)}"
    return hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def machine_id() -> str:
    """The id the operating system keeps for this machine, or "" where none can be read without a subprocess."""
    for candidate in MACHINE_ID_FILES:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found = Path(candidate).read_text().strip()
            if found:
                return found
    if sys.platform == "win32":
        with contextlib.suppress(OSError, ImportError):
            import winreg

            key = winreg.OpenKey(
                winreg.HKEY_LOCAL_MACHINE,
                r"SOFTWARE\Microsoft\Cryptography",
                0,
                winreg.KEY_READ | winreg.KEY_WOW64_64KEY,
            )
            with key:
                return str(winreg.QueryValueEx(key, "MachineGuid")[0])
    return ""


def kept_id(root: Path) -> str:
    """A random id drawn once for this copy and kept in `.fsmem/host-id`; the hostname when it cannot be kept."""
    path = Path(root, STATE_DIR, KEPT_ID)
    with contextlib.suppress(OSError, UnicodeDecodeError):
        kept = read_state(path).decode().strip()
        if kept:
            return kept
    import secrets  # hmac and OpenSSL: loaded only the one time the id is drawn

    drawn = secrets.token_hex(16)
    try:
        atomic_write(path, drawn.encode() + b"\n", exclusive=True, root=Path(root), generated=True)
    except FileExistsError:  # another process drew one first: take it
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return read_state(path).decode().strip() or drawn
    except (OSError, FsmemError):  # a read-only memory, a .fsmem/ that is a link
        import socket

        return socket.gethostname()
    return drawn
