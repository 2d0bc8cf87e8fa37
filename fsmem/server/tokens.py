"""The tokens of `fsmem serve`: which memory a caller reaches, as which agent, read-only or not, and where.

A token is printed once, when it is created: `fsmem_<id>_<secret>`, where
the id (12 hex digits) names its record and the secret is 256 random bits.
`fsmem token create` stores the record pending and activates it only once the
secret is on stdout: a kill, a closed pipe or a full disk between the two
leaves a pending record that no request is let through with, never a working
token whose secret nobody saw.
The store keeps only the record and a salted hash of the secret, in one JSON
file outside every memory (`--tokens FILE`, `$FSMEM_TOKENS`, else
`~/.config/fsmem/tokens.json`), replaced atomically with mode 0600.

The hash is HMAC-SHA256 keyed with a random 16-byte salt per token, compared
with `hmac.compare_digest`. A slow password hash (scrypt, PBKDF2) protects
guessable secrets; this one is 256 bits from `secrets`, so nothing can be
guessed, and a fast hash lets every request be checked against the current
store (a revoked token stops working on the next request).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fsmem.errors import ConfigError, InvalidArgument, NotFound
from fsmem.format import wall_clock
from fsmem.store import outside_files
from fsmem.store.files import atomic_write, file_lock
from fsmem.store.scope import Scope

TOKENS_ENV = "FSMEM_TOKENS"
STORE_VERSION = 1
TOKENS_LIMIT = 16 * outside_files.MiB  # a token record is about 300 bytes
_TOKEN = re.compile(r"^fsmem_([0-9a-f]{12})_([0-9a-f]{64})$")
_ID = re.compile(r"^[0-9a-f]{12}$")
_MEMORY_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_DUMMY_SALT = bytes(16)


def default_path() -> Path:
    """$FSMEM_TOKENS, else $XDG_CONFIG_HOME/fsmem/tokens.json, else ~/.config/fsmem/tokens.json."""
    given = os.environ.get(TOKENS_ENV)
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config, "fsmem", "tokens.json")


def check_memory_name(name: str) -> str:
    if not isinstance(name, str) or not _MEMORY_NAME.match(name):
        raise InvalidArgument(
            f"memory name {name!r} must be 1 to 63 lowercase letters, digits, '-' or '_' (it becomes part of a URL)"
        )
    return name


def _now() -> _dt.datetime:
    return wall_clock().astimezone(_dt.UTC)


def _iso(moment: _dt.datetime) -> str:
    return moment.astimezone(_dt.UTC).isoformat(timespec="seconds")


def parse_expiry(value: str | None) -> str | None:
    """An ISO 8601 date (the token works through that day, UTC) or date and time; None for never."""
    if value is None:
        return None
    text = value.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            day = _dt.date.fromisoformat(text)
            moment = _dt.datetime.combine(day + _dt.timedelta(days=1), _dt.time(), tzinfo=_dt.UTC)
        else:
            moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.UTC)
    except ValueError:
        raise InvalidArgument(
            f"--expires takes an ISO 8601 date such as 2026-12-31 or a time such as 2026-12-31T18:00+01:00, not {value!r}"
        ) from None
    if moment <= _now():
        raise InvalidArgument(f"--expires {value} is already past")
    return _iso(moment)


def _digest(salt: bytes, secret: str) -> str:
    return hmac.new(salt, secret.encode("ascii"), hashlib.sha256).hexdigest()


@dataclass
class TokenRecord:
    """One token as stored: what it grants, its life, and the salted hash of its secret (never the secret)."""

    id: str
    memory: str
    agent: str
    read_only: bool = False
    paths: list[str] = field(default_factory=list)
    created: str = ""
    expires: str | None = None
    revoked: str | None = None
    salt: str = ""
    hash: str = ""
    pending: bool = False  # stored, its secret not yet shown (`TokenStore.activate`); older stores: never

    def status(self, now: _dt.datetime | None = None) -> str:
        """active, expired, revoked, or pending (its secret was never shown: it never works)."""
        if self.revoked:
            return "revoked"
        if self.pending:
            return "pending"
        if self.expires and _dt.datetime.fromisoformat(self.expires) <= (now or _now()):
            return "expired"
        return "active"

    def to_dict(self) -> dict[str, Any]:
        """The record as `fsmem token list --json` shows it: everything but the salt and hash."""
        data = asdict(self)
        del data["salt"], data["hash"]
        data["status"] = self.status()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenRecord:
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        record = cls(**known)
        if not _ID.match(record.id) or not record.salt or not record.hash:
            raise ValueError(f"token record {record.id!r} is incomplete")
        return record


@dataclass
class TokenList:
    """What `fsmem token list` prints."""

    tokens: list[TokenRecord]
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"store": str(self.path), "tokens": [t.to_dict() for t in self.tokens]}

    def to_text(self) -> str:
        if not self.tokens:
            return f"(no tokens in {self.path})"
        lines = []
        for t in self.tokens:
            reach = ", ".join(t.paths) if t.paths else "everything"
            mode = "read-only" if t.read_only else "read-write"
            until = t.expires or "never"
            lines.append(
                f"{t.id}  {t.status():7}  memory {t.memory}  agent {t.agent}  {mode}  reach {reach}  expires {until}"
            )
        lines.append(f"[{len(self.tokens)} token(s) in {self.path}]")
        return "\n".join(lines)


@dataclass
class CreatedToken:
    """A new token: the secret is in `token`, shown this once."""

    token: str
    record: TokenRecord
    path: Path

    def to_dict(self) -> dict[str, Any]:
        """The token and its record, with the status it has once this is shown (printing it activates it)."""
        return {"token": self.token, **self.record.to_dict(), "status": "active", "store": str(self.path)}

    def to_text(self) -> str:
        return self.token


class TokenStore:
    """The token file: read it, add, revoke and check tokens. Every change is one atomic replacement."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._records: dict[str, TokenRecord] = {}
        self._stamp: tuple[int, int, int, int] | None = None

    # -- reading -----------------------------------------------------------------------------------
    def load(self) -> list[TokenRecord]:
        """Every record (none when the file does not exist yet); ConfigError when it cannot be read."""
        try:
            text = outside_files.read_text(self.path, what="the token store", limit=TOKENS_LIMIT, error=ConfigError)
        except NotFound:
            return []
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("version") != STORE_VERSION:
                raise ValueError(f"expected a version {STORE_VERSION} token store")
            return [TokenRecord.from_dict(item) for item in data.get("tokens", [])]
        except (ValueError, TypeError, AttributeError) as exc:
            raise ConfigError(f"the token store {self.path} is damaged ({exc}); nothing was changed") from None

    def current(self) -> dict[str, TokenRecord]:
        """Records by id, re-read whenever the file changed (a stat per call): revocations apply at once."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)  # ctime: an mtime put back
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp or stamp is None:
            self._records = {r.id: r for r in self.load()}
            self._stamp = stamp
        return self._records

    def verify(self, token: str | None, now: _dt.datetime | None = None) -> tuple[TokenRecord | None, str]:
        """(record, "ok") for a valid, unexpired, unrevoked token; else (record or None, why not).

        The reasons are for the server's log: missing, malformed, unknown, wrong, expired, revoked.
        """
        if not token:
            return None, "missing"
        match = _TOKEN.match(token)
        if match is None:
            return None, "malformed"
        token_id, secret = match.groups()
        record = self.current().get(token_id)
        salt = bytes.fromhex(record.salt) if record is not None else _DUMMY_SALT
        expected = record.hash if record is not None else "0" * 64
        if not hmac.compare_digest(_digest(salt, secret), expected) or record is None:
            return None, "unknown" if record is None else "wrong"
        status = record.status(now)
        if status != "active":
            return record, status
        return record, "ok"

    # -- changing ----------------------------------------------------------------------------------
    def _save(self, records: Iterable[TokenRecord]) -> None:
        data = {"version": STORE_VERSION, "tokens": [asdict(r) for r in records]}
        folder = self.path.parent
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
        atomic_write(self.path, (json.dumps(data, indent=2) + "\n").encode("utf-8"), mode=0o600)

    def create(
        self,
        *,
        memory: str,
        agent: str,
        read_only: bool = False,
        paths: Iterable[str] | None = None,
        expires: str | None = None,
        active: bool = True,
    ) -> CreatedToken:
        """A new token for `agent` on `memory` (its secret is returned once, never stored).

        With `active=False` the record is stored pending, refused like a revoked one until `activate`:
        a face that shows the secret (the CLI's stdout) activates it once the secret is shown.
        """
        check_memory_name(memory)
        if not isinstance(agent, str) or not agent.strip():
            raise InvalidArgument("a token needs an agent: fsmem token create --memory NAME --agent AGENT")
        scope = Scope.of(list(paths or []))
        secret = secrets.token_hex(32)
        salt = secrets.token_bytes(16)
        with self._lock():
            records = self.load()
            taken = {r.id for r in records}
            token_id = secrets.token_hex(6)
            while token_id in taken:
                token_id = secrets.token_hex(6)
            record = TokenRecord(
                id=token_id,
                memory=memory,
                agent=agent,
                read_only=read_only,
                paths=scope.to_list() if scope is not None else [],
                created=_iso(_now()),
                expires=parse_expiry(expires),
                salt=salt.hex(),
                hash=_digest(salt, secret),
                pending=not active,
            )
            self._save([*records, record])
        return CreatedToken(f"fsmem_{token_id}_{secret}", record, self.path)

    def activate(self, token_id: str) -> TokenRecord:
        """Make a pending token work, now that its secret has been shown; NotFound when no such token is stored
        (a revoked one stays revoked)."""
        with self._lock():
            records = self.load()
            found = next((r for r in records if r.id == token_id), None)
            if found is None:
                raise NotFound(f"no such token {token_id!r} in {self.path}; fsmem token list shows their ids")
            if found.pending:
                found.pending = False
                self._save(records)
        return found

    def revoke(self, token_id: str) -> TokenRecord:
        """Mark a token revoked (kept in the store, for the record), named by its id or by the token itself
        (`fsmem_<id>_<secret>`, whose secret must match); NotFound otherwise."""
        whole = _TOKEN.match(token_id.strip())
        with self._lock():
            records = self.load()
            wanted = whole.group(1) if whole else token_id
            found = next((r for r in records if r.id == wanted), None)
            if found is not None and whole is not None:
                if not hmac.compare_digest(_digest(bytes.fromhex(found.salt), whole.group(2)), found.hash):
                    found = None
            if found is None:
                what = "token (its secret matches none stored)" if whole else f"token {token_id!r}"
                raise NotFound(f"no such {what} in {self.path}; fsmem token list shows their ids")
            if not found.revoked:
                found.revoked = _iso(_now())
                self._save(records)
        return found

    def list(self, *, memory: str | None = None, agent: str | None = None) -> TokenList:
        records = [
            r for r in self.load() if (memory is None or r.memory == memory) and (agent is None or r.agent == agent)
        ]
        return TokenList(records, self.path)

    def _lock(self):
        folder = self.path.parent
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
        return file_lock(folder, f"{self.path.name}", state=folder)
