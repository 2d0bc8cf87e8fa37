"""The disk: containment and scopes, atomic locked writes, per-file metadata and its cache, the walk, ripgrep."""
