"""The tenant of a Postgres transaction: `app.tenant_id`, which the row-level security policies read.

Migration 0006 makes every table visible and writable only for rows whose `tenant_id` equals the
setting. It is set with `set_config(..., true)`, i.e. for the current transaction only: a pooled
connection never carries one request's tenant into the next, and a transaction that did not set it
sees and writes nothing. SQLite has no such setting; its queries filter by `tenant_id` themselves.

`begin_in_tenant` opens a transaction already scoped to its tenant in one round trip (BEGIN and the
setting as one simple-protocol message), where `BEGIN` and then `set_tenant` take two.
`hold_tenant` sets it for a connection's session instead, for connections that set it before
every use and are never pooled (the readers' kept ones). `execute_in_tenant` runs one statement in
a transaction of its own scoped to a tenant, in one round trip when its arguments can be written
as literals: the setting and the statement as one simple-protocol message, which Postgres runs as
one implicit transaction (committed at its end, rolled back whole when any part fails), so no
transaction outlives the call.
"""

from __future__ import annotations

import re
from contextlib import suppress
from typing import Any, Final

from sqlalchemy import Connection, text

TENANT_SETTING: Final = "app.tenant_id"

_SET_TENANT = text(f"SELECT set_config('{TENANT_SETTING}', :tenant, true)")
_SET_TENANT_DRIVER: Final = f"SELECT set_config('{TENANT_SETTING}', $1, true)"
_HOLD_TENANT_DRIVER: Final = f"SELECT set_config('{TENANT_SETTING}', $1, false)"
# The simple protocol takes no parameters, so the id goes in the text: only ids with nothing that
# would need quoting (identity's tenant ids are all of this form); any other takes the long way.
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_PLACEHOLDER = re.compile(r"\$([1-9][0-9]*)")


def set_tenant(conn: Connection, tenant_id: str) -> None:
    """Scope the rest of `conn`'s current transaction (Postgres) to `tenant_id`."""
    _check(tenant_id)
    conn.execute(_SET_TENANT, {"tenant": tenant_id})


def plain(value: str) -> bool:
    """Whether `value` may be written into a simple-protocol statement as a literal as it is."""
    return _PLAIN_ID.fullmatch(value) is not None


def setting_of(tenant_id: str, *, local: bool = True) -> str:
    """The statement setting the tenant, its id written in it: for a simple-protocol message (the
    id must be `plain`). `local`: for the current transaction only, else for the session."""
    if not plain(tenant_id):
        raise ValueError("a tenant id written into a statement must be plain")
    return f"SELECT set_config('{TENANT_SETTING}', '{tenant_id}', {'true' if local else 'false'})"


async def begin_in_tenant(driver: Any, tenant_id: str) -> None:
    """Open a transaction on the asyncpg connection `driver`, scoped to `tenant_id`.

    The caller ends it (COMMIT or ROLLBACK on `driver`); SQLAlchemy does not know of it, so a
    SQLAlchemy connection running statements in it must be in AUTOCOMMIT mode (no BEGIN of its own).
    """
    _check(tenant_id)
    if plain(tenant_id):
        await driver.execute(f"BEGIN; {setting_of(tenant_id)}")
        return
    await driver.execute("BEGIN")
    await driver.fetchval(_SET_TENANT_DRIVER, tenant_id)


async def hold_tenant(driver: Any, tenant_id: str) -> None:
    """Set the asyncpg connection `driver`'s session (not a transaction of it) to `tenant_id`, for
    the statements it runs from now on, each a transaction of its own. Only for a connection that is
    never given back to a pool and whose every use sets its own tenant first (readers.py)."""
    _check(tenant_id)
    if plain(tenant_id):
        await driver.execute(setting_of(tenant_id, local=False))
        return
    await driver.fetchval(_HOLD_TENANT_DRIVER, tenant_id)


async def execute_in_tenant(driver: Any, tenant_id: str, statement: str, *args: str) -> str:
    """`statement` (with `$1`... placeholders) on the asyncpg connection `driver` in a transaction of
    its own scoped to `tenant_id`, committed; its status (e.g. `INSERT 0 1`). One round trip when the
    tenant and every argument are plain; else BEGIN with the setting, the statement, COMMIT. A call
    that fails or is cancelled is rolled back unconditionally (cancelled with BEGIN in flight, the
    driver does not yet know it is in a transaction, and a later COMMIT would commit what it left)."""
    _check(tenant_id)
    try:
        if plain(tenant_id) and all(plain(arg) for arg in args):
            inlined = _PLACEHOLDER.sub(lambda found: f"'{args[int(found[1]) - 1]}'", statement)
            status: str = await driver.execute(f"{setting_of(tenant_id)}; {inlined}")
            return status
        await begin_in_tenant(driver, tenant_id)
        status = await driver.execute(statement, *args)
        await driver.execute("COMMIT")
        return status
    except BaseException:
        if not driver.is_closed():
            with suppress(Exception):
                await driver.execute("ROLLBACK")
        raise


def _check(tenant_id: str) -> None:
    if not tenant_id:
        # An empty setting matches no row, so writes would fail their WITH CHECK with a worse error.
        raise ValueError("a tenant id is required")
