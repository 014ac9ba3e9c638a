"""Snapshots of a workspace's files, so that what a turn changed can be put back (opencode's
`session/revert` and `snapshot/`).

A `SnapshotRepo` is a bare git object store (libgit2, in the tenant's data directory, never in the
workspace) that records the state of one directory's files as git trees: `track()` stages every
file git would see (the workspace's `.gitignore` applies; the server's and other tenants' roots
inside it are excluded) and writes a tree. The session layer takes a tree before the first tool of a
step that may change files, and records the paths that differ after the step as a `patch` part of
the assistant message. Reverting a session to a message puts each path changed after that point
back to its content in the earliest such tree, and deletes the ones that did not exist then.

libgit2 runs no hooks or filters, and restored files are written by this package itself, refusing
any path whose real location (symlinks followed) leaves the tracked directory.
"""
