"""The last seq of each session and the last position of each tenant, as a Postgres batch needs them.

On a shared database (replicas) a batch must not trust what it wrote before: another writer may
have written the same sessions or tenant since. So under its locks a batch learns the last numbers
of the sessions of the tenant it is scoped to (`read_last_numbers`: one statement). With a single
writer, which is the common case, those are the numbers its own last batches committed; so
`ExpectedNumbers` remembers them, and a batch whose sessions and tenant it all knows sends them
with its opening as a check instead (`check`): a statement in the same simple-protocol message,
after the locks, that fails naming `STALE` unless every number is as expected. A batch whose check
fails is rolled back before it wrote anything and opened again the long way; after a miss the
check is not tried for a while (another writer is active), so a busy cluster does not pay for
failed checks on every batch. While no check failed for long (`settled`), the batch's statements
are held with its opening and sent in one message with its COMMIT (held.py): should the
check fail there after all, nothing was written and the batch is written again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Final, TypeVar

from sqlalchemy import Connection, text

from agentforge.model.events import Event
from agentforge.store.audit import GENESIS_HASH
from agentforge.store.held import BAD_INTEGER
from agentforge.store.tenancy import plain

# What the check casts to an integer when a number is not as expected: Postgres then fails with
# invalid_text_representation, naming the text.
STALE: Final = "last numbers changed "
# Batches that read their numbers after a failed check before checking again.
PAUSE_AFTER_MISS: Final = 64
# Batches checked since the last miss before a batch's statements are held with its check (held.py
# `hold`): a held batch whose check fails is written again whole, so only where no other writer is.
SETTLED_AFTER_MISS: Final = 1024
EXPECTED_SIZE: Final = 10_000

# Under the batch's locks: the last seq of each of a tenant's sessions, then its last position.
_LAST_NUMBERS = text(
    "SELECT 0, s, (SELECT max(seq) FROM event WHERE session_id = s)"
    " FROM unnest(CAST(:sessions AS text[])) AS s"
    " UNION ALL SELECT 1, CAST(:tenant AS text), (SELECT max(position) FROM event WHERE tenant_id = :tenant)"
)


def own_sessions(events: list[Event], tenant_id: str) -> list[str]:
    """The sessions of `tenant_id`'s events, sorted."""
    return sorted({event.session_id or "" for event in events if event.tenant_id == tenant_id})


def read_last_numbers(
    conn: Connection, tenant_id: str, sessions: list[str], draft: dict[str, int], positions: dict[str, int]
) -> None:
    """Into `draft` and `positions`: the last seq of each of `sessions` and the tenant's last
    position (0: none yet), read in one statement; the transaction is scoped to `tenant_id`."""
    for kind, key, last in conn.execute(_LAST_NUMBERS, {"sessions": sessions, "tenant": tenant_id}):
        (draft if kind == 0 else positions)[key] = last or 0


AuditHead = tuple[int, str]  # a chain's last (seq, row_hash)


class ExpectedNumbers:
    """The numbers this writer's committed batches left, for the check of the next one: sessions'
    last seqs and history revisions, tenants' last positions and audit chain heads."""

    def __init__(self, capacity: int = EXPECTED_SIZE) -> None:
        self._capacity = capacity
        self._seqs: OrderedDict[str, int] = OrderedDict()
        self._positions: OrderedDict[str, int] = OrderedDict()
        self._revisions: OrderedDict[str, int] = OrderedDict()
        self._heads: OrderedDict[str, AuditHead] = OrderedDict()
        self._pause = 0
        self._since_miss = SETTLED_AFTER_MISS  # none yet

    def guess(self, tenant_id: str, sessions: list[str]) -> tuple[dict[str, int], int] | None:
        """The expected last seqs of `sessions` and position of `tenant_id`, or None: not all known,
        or a check failed lately."""
        if self._pause:
            self._pause -= 1
            return None
        position = self._positions.get(tenant_id)
        seqs = {session_id: self._seqs.get(session_id) for session_id in sessions}
        if position is None or any(seq is None for seq in seqs.values()):
            return None
        return {session_id: seq for session_id, seq in seqs.items() if seq is not None}, position

    def revisions(self, sessions: list[str]) -> dict[str, int]:
        """The expected history revisions of those of `sessions` whose revision is known."""
        known = {session_id: self._revisions.get(session_id) for session_id in sessions}
        return {session_id: revision for session_id, revision in known.items() if revision is not None}

    def head(self, tenant_id: str) -> AuditHead | None:
        return self._heads.get(tenant_id)

    @property
    def settled(self) -> bool:
        """Whether no check failed lately (`SETTLED_AFTER_MISS`): no other writer seems active."""
        return self._since_miss >= SETTLED_AFTER_MISS

    def record(
        self,
        seqs: dict[str, int],
        positions: dict[str, int],
        revisions: dict[str, int | None] | None = None,
        heads: dict[str, AuditHead | None] | None = None,
    ) -> None:
        """After a commit: the last numbers it left (what this writer read or wrote under its locks).
        In `revisions` and `heads`, None: it changed to a value this writer does not know."""
        self._since_miss += 1
        _remember(self._seqs, seqs, self._capacity)
        _remember(self._positions, positions, self._capacity)
        _remember(self._revisions, revisions or {}, self._capacity)
        _remember(self._heads, heads or {}, self._capacity)

    def missed(self) -> None:
        """A check failed: another writer is active; read the numbers for a while."""
        self.forget()
        self._pause = PAUSE_AFTER_MISS
        self._since_miss = 0

    def forget(self) -> None:
        self._seqs.clear()
        self._positions.clear()
        self._revisions.clear()
        self._heads.clear()


_V = TypeVar("_V")


def _remember(cache: OrderedDict[str, _V], values: Mapping[str, _V | None], capacity: int) -> None:
    """Set (or with None, drop) each value, most recent last, within `capacity`."""
    for key, value in values.items():
        if value is None:
            cache.pop(key, None)
            continue
        cache[key] = value
        cache.move_to_end(key)
    while len(cache) > capacity:
        cache.popitem(last=False)


def check(
    tenant_id: str,
    seqs: dict[str, int],
    position: int,
    bumps: dict[str, int] | None = None,
    head: AuditHead | None = None,
) -> str:
    """A statement failing with `STALE` unless the sessions' last seqs and the tenant's last position
    are these. Ids are written as literals: only for plain ids (see `tenancy.plain`).

    `bumps`: sessions (of the tenant) whose history revision the statement advances by one, each
    expected to be at the given value before. `head`: the tenant's expected audit chain head.

    Plain SQL, not a `DO` block (plpgsql compiled on each call cost Postgres ~1 ms): a failed
    condition casts a text that is no integer, and the text is not a constant, so planning never
    evaluates it."""
    # The caller checked them too; checked again here, where they become SQL text.
    if not all(plain(value) for value in (tenant_id, *seqs, *(bumps or ()))):
        raise ValueError("ids written as literals must be plain")
    prefix = ""
    conditions = [
        f"coalesce((SELECT max(seq) FROM event WHERE session_id = '{session_id}'), 0) = {seq:d}"
        for session_id, seq in seqs.items()
    ]
    conditions.append(
        f"coalesce((SELECT max(position) FROM event WHERE tenant_id = '{tenant_id}'), 0) = {position:d}"
    )
    if bumps:
        # Run once and to completion whatever the SELECT reads; the row lock orders other writers.
        ids = ", ".join(f"'{session_id}'" for session_id in bumps)
        prefix = (
            "WITH bumped AS (UPDATE session SET history_revision = history_revision + 1"
            f" WHERE tenant_id = '{tenant_id}' AND id IN ({ids}) RETURNING id, history_revision) "
        )
        pairs = ", ".join(f"('{session_id}', {revision + 1:d})" for session_id, revision in bumps.items())
        conditions.append(
            f"(SELECT count(*) FROM bumped WHERE (id, history_revision) IN ({pairs})) = {len(bumps):d}"
        )
    if head is not None:
        seq, row_hash = head
        if not plain(row_hash):
            raise ValueError("an audit row hash is lowercase hex")
        conditions.append(
            "coalesce((SELECT seq || ':' || row_hash FROM audit_log"
            f" WHERE tenant_id = '{tenant_id}' ORDER BY seq DESC LIMIT 1), '0:{GENESIS_HASH}')"
            f" = '{seq:d}:{row_hash}'"
        )
    return (
        f"{prefix}SELECT CAST(CASE WHEN {' AND '.join(conditions)} THEN '0'"
        f" ELSE '{STALE}' || pg_backend_pid() END AS integer)"
    )


def stale(exc: BaseException) -> bool:
    """Whether `exc` is the check's failure."""
    return getattr(exc, "sqlstate", None) == BAD_INTEGER and f'"{STALE}' in str(exc)
