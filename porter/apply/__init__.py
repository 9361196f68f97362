"""Writing a port: the `ChangeSet` (all files or none), unified diffs, git safety, status lines.

May import: the standard library, `porter.errors`, `porter.source.checkout`. Nothing here
knows what an op is.
"""
