"""Interactive terminals (opencode's `/pty` routes): a shell on a pseudo-terminal in the tenant's
workspace, driven over a WebSocket.

Only a caller that may run commands gets one: the local user, or a tenant the server config grants
`tenancy.shell` (the same grant the bash tool needs). The shell runs with the tenant's process
environment (tools/confinement.py), starts through `tools.process.start_pty` (where every command
start lives, so an OS sandbox wraps it there), and belongs to its tenant: another tenant's terminal
ids answer 404 like ids that never existed.
"""
