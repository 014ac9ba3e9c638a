"""The refused-request audit throttle shared by every replica on a Postgres database.

Each replica's in-process throttle (identity/failures.py) bounds what it asks here; this table makes
the window cluster-wide: one audit row per (tenant, peer, reason) a window, whichever replica
refused, and the refusals counted meanwhile (here and in the replicas) go with the next row.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, and_, case, delete

from agentforge.store.conflicts import conflict_insert
from agentforge.store.schema import audit_throttle

_T = audit_throttle


def throttle_key(peer: str | None, reason: str) -> str:
    """Fixed length whatever the reason says (a primary key column)."""
    return hashlib.sha256(f"{peer or ''}\x00{reason}".encode()).hexdigest()


def admit(conn: Connection, tenant_id: str, key: str, counted: int, now: int, window: int) -> int | None:
    """One refusal admitted by this replica, which counted `counted` more since its last row: the
    suppressed count to write with an audit row now, or None when another replica wrote one within
    `window` ms (the refusals are then added to its count). Replicas racing on a key serialize on its
    row (the upsert locks it until the transaction ends). Purges the tenant's rows whose window
    passed with nothing owed."""
    conn.execute(
        delete(_T).where(_T.c.tenant_id == tenant_id, _T.c.written_at < now - window, _T.c.suppressed == 0)
    )
    due = _T.c.written_at <= now - window
    row = {"tenant_id": tenant_id, "key": key, "written_at": now, "suppressed": -counted}
    insert = conflict_insert("postgresql", _T).values(row)  # only Postgres shares the throttle
    statement = insert.on_conflict_do_update(
        index_elements=[_T.c.tenant_id, _T.c.key],
        set_={
            # Due: a row is written now carrying the old count plus ours (kept negative to say so).
            "written_at": case((due, now), else_=_T.c.written_at),
            "suppressed": case((due, -(_T.c.suppressed + counted)), else_=_T.c.suppressed + counted + 1),
        },
    ).returning(_T.c.suppressed)
    suppressed = int(conn.execute(statement).scalar_one())
    if suppressed > 0:
        return None
    # Admitted: the row restarts its window with nothing owed (the count goes into the audit row).
    conn.execute(_T.update().where(and_(_T.c.tenant_id == tenant_id, _T.c.key == key)).values(suppressed=0))
    return -suppressed
