"""The row-level security every tenant table gets (Postgres), as migration 0006 first gave it.

`owner_maintenance` lets the role running the migration (CURRENT_USER, the owner; never the runtime
role) see and change every row; `tenant_isolation` binds everyone else to the rows of the
transaction's tenant (`app.tenant_id`, store/tenancy.py) for reading and for writing. Migrations
that add a table call `isolate_tenants` so the statements stay those of 0006: changing what this
emits changes what those migrations did (0006 included), so it must not change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

OF_TENANT: Final = "tenant_id = current_setting('app.tenant_id', true)"
TENANT_ROWS: Final = f"USING ({OF_TENANT}) WITH CHECK ({OF_TENANT})"
ANY_ROW: Final = "USING (true) WITH CHECK (true)"


def force_row_security(execute: Callable[[str], object], table: str) -> None:
    """Row-level security on `table`, the owner bound too, and the owner's maintenance policy."""
    execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
    execute(f'ALTER TABLE "{table}" FORCE ROW LEVEL SECURITY')
    execute(f'CREATE POLICY owner_maintenance ON "{table}" FOR ALL TO CURRENT_USER {ANY_ROW}')


def isolate_tenants(execute: Callable[[str], object], table: str) -> None:
    """What 0006 gives every tenant table: forced row security, owner maintenance, tenant rows."""
    force_row_security(execute, table)
    execute(f'CREATE POLICY tenant_isolation ON "{table}" FOR ALL {TENANT_ROWS}')
