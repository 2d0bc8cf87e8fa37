"""Tree surgery: a commit's tree with some paths changed, rewriting only the trees on those paths.

Committing one note in a 10k-file memory rewrites the five or so trees from
the root down to the note's folder, not an index of 10k entries: the cost of a
commit stays flat as the memory grows, and the commit holds exactly the paths
it was given (a human's staged files are never swept into an agent's commit).
"""

from __future__ import annotations

from collections.abc import Callable

TREE_MODE = "40000"
FILE_MODE = "100644"
EXEC_MODE = "100755"
LINK_MODE = "120000"
BLOB_MODES = (FILE_MODE, EXEC_MODE)  # a regular file's, as git writes them in a tree

Entry = tuple[str, str]  # (mode, object id)


def parse_tree(body: bytes, id_bytes: int) -> dict[str, Entry]:
    """The entries of a tree object: name -> (mode, id)."""
    entries: dict[str, Entry] = {}
    at = 0
    while at < len(body):
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries[name] = (body[at:space].decode(), body[nul + 1 : nul + 1 + id_bytes].hex())
        at = nul + 1 + id_bytes
    return entries


def tree_body(entries: dict[str, Entry]) -> bytes:
    """A tree object's bytes, entries in git's order (a folder sorts as if its name ended with '/')."""

    def order(name: str) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        return raw + b"/" if entries[name][0] == TREE_MODE else raw

    out = bytearray()
    for name in sorted(entries, key=order):
        mode, oid = entries[name]
        out += f"{mode} ".encode() + name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(oid)
    return bytes(out)


class TreeEditor:
    """A root tree with pending changes: `get` and `set` paths, `write` the trees that changed."""

    def __init__(
        self,
        read_tree: Callable[[str], dict[str, Entry]],
        write_tree: Callable[[dict[str, Entry]], str],
        root: str | None,
    ):
        self._read = read_tree  # a tree's entries, as a dict this editor may change
        self._write = write_tree
        self.root = root
        self._folders: dict[str, dict[str, Entry]] = {}
        self._dirty: set[str] = set()

    def _folder(self, folder: str, create: bool = False) -> dict[str, Entry] | None:
        if folder in self._folders:
            return self._folders[folder]
        if folder == "":
            entries = self._read(self.root) if self.root else {}
        else:
            parent_name, _, name = folder.rpartition("/")
            parent = self._folder(parent_name, create)
            if parent is None:
                return None
            entry = parent.get(name)
            if entry is not None and entry[0] == TREE_MODE:
                entries = self._read(entry[1])
            elif create:
                entries = {}
            else:
                return None
        self._folders[folder] = entries
        return entries

    def get(self, path: str) -> str | None:
        """The blob id at `path`, or None when no file is there."""
        entry = self.entry(path)
        return entry[1] if entry is not None else None

    def entry(self, path: str) -> Entry | None:
        """(mode, blob id) at `path`, or None when no file is there."""
        folder, _, name = path.rpartition("/")
        entries = self._folder(folder)
        entry = entries.get(name) if entries is not None else None
        return entry if entry is not None and entry[0] != TREE_MODE else None

    def set(self, path: str, oid: str | None) -> None:
        """Put the blob `oid` at `path` (keeping an executable bit already there), or remove it (None)."""
        folder, _, name = path.rpartition("/")
        entries = self._folder(folder, create=oid is not None)
        if entries is None:
            return
        if oid is None:
            if name not in entries:
                return
            del entries[name]
        else:
            old = entries.get(name)
            entries[name] = (old[0] if old is not None and old[0] in BLOB_MODES else FILE_MODE, oid)
        while True:
            self._dirty.add(folder)
            if not folder:
                break
            folder = folder.rpartition("/")[0]

    def put(self, path: str, entry: Entry | None) -> None:
        """Put `entry` (mode and id: a file, a link, a folder) at `path` as it is, or remove what is there (None)."""
        folder, _, name = path.rpartition("/")
        entries = self._folder(folder, create=entry is not None)
        if entries is None or (entry is None and name not in entries):
            return
        if entry is None:
            del entries[name]
        else:
            entries[name] = entry
        for inner in [f for f in self._folders if f == path or f.startswith(path + "/")]:
            self._folders.pop(inner)  # what was read or changed under this name is no longer what is there
            self._dirty.discard(inner)
        while True:
            self._dirty.add(folder)
            if not folder:
                break
            folder = folder.rpartition("/")[0]

    def write(self) -> str:
        """Write the changed trees, deepest first, and return the new root tree's id."""
        for folder in sorted(self._dirty, key=lambda f: (-f.count("/") if f else 1, f)):
            entries = self._folders[folder]
            if folder:
                parent_name, _, name = folder.rpartition("/")
                parent = self._folders[parent_name]
                if entries:
                    parent[name] = (TREE_MODE, self._write(entries))
                else:
                    parent.pop(name, None)
        self._dirty.clear()
        self.root = self._write(self._folder("") or {})
        return self.root
