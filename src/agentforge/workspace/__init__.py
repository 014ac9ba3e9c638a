"""The tenant's workspace as HTTP clients browse it: listing and reading files, searching them, and
the git state of the workspace (opencode's `/file`, `/find` and `/vcs` routes).

Everything here goes through `WorkspaceAccess` (access.py): a path a client names is resolved against
the tenant's workspace and refused when its real location (symlinks followed) lies outside it or in a
directory inside it that is not the tenant's (the server's data, other tenants' roots). A client of
these routes cannot be asked for `external_directory` the way a tool call is, so nothing outside the
workspace is ever reachable here, whatever the tenant's permission rules say.
"""
