"""Audit entries derived from session events, appended in the writer's transaction (see batch.py).

`record_event` runs just before the projector applies the event, so it can compare the event with the
row it is about to change and record transitions only: a tool part updated ten times while running
yields one `tool.requested` and one `tool.executed`, and a user message rewritten later (its summary)
is one `prompt.accepted`. Reads stay cheap: text and reasoning parts (the hot path) cost nothing;
only tool parts, user messages and session deletions read their stored row, by primary key (a
tool part's on Postgres in the statement of its upsert, which hands the row it replaced back, or
checks there that it is the row the writer last wrote: store/last_written.py). If the event is then
dropped (a late write), its entries roll back with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
from sqlalchemy import bindparam, select

from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.model.part import REFUSED_BY, TOOL_FINISHED
from agentforge.store import audit
from agentforge.store.audit import AuditEntry, ChainBuffer
from agentforge.store.projector import Writes
from agentforge.store.schema import message, part, session

_PART_DATA = select(part.c.data).where(
    part.c.id == bindparam("b_id"), part.c.tenant_id == bindparam("b_tenant")
)
_MESSAGE_EXISTS = select(message.c.id).where(
    message.c.id == bindparam("b_id"), message.c.tenant_id == bindparam("b_tenant")
)
_SESSION_EXISTS = select(session.c.id).where(
    session.c.id == bindparam("b_id"), session.c.tenant_id == bindparam("b_tenant")
)

# One entry's action and data (and the session it concerns) before tenant and actor are added.
_Draft = tuple[str, dict[str, Any]]


def record_event(writes: Writes, event: Event, chain: ChainBuffer | None = None) -> None:
    """Append the audit entries `event` calls for (none for most) inside the writer's transaction:
    into `chain`, which the caller flushes before its transaction ends, or at once without one.
    A tool part's entries depend on its stored row: on Postgres they are derived once the
    projector's upsert has read it (`Writes.replaced_by`), in the same statement, or, where the
    writer holds its message, from the row it expects there, checked in that statement
    (store/last_written.py)."""
    if event.type == ev.PART_UPDATED and event.properties["part"].get("type") == "tool":

        def record(stored: str | None) -> None:
            _record(writes, event, _tool_transitions(stored, event.properties), chain)

        if writes.replaced_by(event.properties["part"]["id"], record):
            return
    derive = _DERIVERS.get(event.type)
    if derive is not None:
        _record(writes, event, derive(writes, event.tenant_id, event.properties), chain)


def _record(writes: Writes, event: Event, drafts: list[_Draft], chain: ChainBuffer | None) -> None:
    if not drafts:
        return
    entries = [
        AuditEntry(event.tenant_id, action, event.actor, data, session_id=event.session_id)
        for action, data in drafts
    ]
    if chain is not None:
        chain.add(entries)
        return
    writes.flush()  # keep the projector's earlier statements ahead of ours
    audit.append(writes.conn, entries)


def may_audit(event: Event) -> bool:
    """Whether `record_event` may append entries for `event` (False: it certainly appends none), so
    the writer can take the chain's lock with its opening rather than in a statement of its own."""
    # Malformed properties answer True: the event then fails (alone) where it is recorded, as before.
    if event.type == ev.MESSAGE_UPDATED:
        info = event.properties.get("info")
        return not isinstance(info, dict) or info.get("role") == "user"
    if event.type == ev.PART_UPDATED:
        part = event.properties.get("part")
        return not isinstance(part, dict) or part.get("type") == "tool"
    return event.type in _DERIVERS


def _exists(writes: Writes, statement: Any, tenant_id: str, row_id: str) -> bool:
    return writes.run(statement, {"b_id": row_id, "b_tenant": tenant_id}).first() is not None


def _session_created(_writes: Writes, _tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    info = props["info"]
    data = {"title": info.get("title"), "directory": info.get("directory"), "parentID": info.get("parentID")}
    return [(audit.SESSION_CREATED, data)]


def _session_deleted(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    # Deleting twice is harmless for the projector; only the delete that removes the row is recorded.
    if not _exists(writes, _SESSION_EXISTS, tenant_id, props["sessionID"]):
        return []
    return [(audit.SESSION_DELETED, {})]


def _message_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    info = props["info"]
    if info.get("role") != "user":
        return []
    # Written with its parts (strict), the message is new or the group fails, and this entry with it.
    if not writes.strict and _exists(writes, _MESSAGE_EXISTS, tenant_id, info["id"]):
        return []
    return [
        (
            audit.PROMPT_ACCEPTED,
            {"messageID": info["id"], "agent": info.get("agent"), "model": info.get("model")},
        )
    ]


def _part_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    if props["part"].get("type") != "tool":
        return []
    stored = writes.run(_PART_DATA, {"b_id": props["part"]["id"], "b_tenant": tenant_id})
    return _tool_transitions(stored.scalar_one_or_none(), props)


def _tool_transitions(stored: str | None, props: Mapping[str, Any]) -> list[_Draft]:
    """The entries of a tool part's update given its stored row's data (None: a new part)."""
    new = props["part"]
    before = None if stored is None else orjson.loads(stored).get("state", {}).get("status")
    state = new.get("state") or {}
    status = state.get("status")
    call = {
        "messageID": new.get("messageID"),
        "partID": new["id"],
        "callID": new.get("callID"),
        "tool": new.get("tool"),
    }
    drafts: list[_Draft] = []
    if stored is None:
        drafts.append((audit.TOOL_REQUESTED, call))
    if status in TOOL_FINISHED and before not in TOOL_FINISHED:
        args = audit.digest(state.get("input") or {})
        refused_by = (state.get("metadata") or {}).get(REFUSED_BY)
        if status == "error" and refused_by:
            # Refused without asking anyone: the call never ran.
            drafts.append((audit.TOOL_DENIED, {**call, "decidedBy": refused_by, "argsSha256": args}))
        else:
            drafts.append((audit.TOOL_EXECUTED, {**call, "status": status, "argsSha256": args}))
    return drafts


def _permission_asked(_writes: Writes, _tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    tool = props.get("tool") or {}
    data = {
        "requestID": props["id"],
        "permission": props.get("permission"),
        # The patterns come from the tool's arguments (commands, paths, URLs): digested like them.
        "patternsSha256": audit.digest(props.get("patterns") or []),
        "messageID": tool.get("messageID"),
        "callID": tool.get("callID"),
    }
    return [(audit.PERMISSION_ASKED, data)]


def _permission_replied(_writes: Writes, _tenant_id: str, props: Mapping[str, Any]) -> list[_Draft]:
    action = audit.TOOL_APPROVED if props.get("status") == "approved" else audit.TOOL_DENIED
    data = {
        "requestID": props["requestID"],
        "reply": props.get("reply"),
        "decision": props.get("decision"),
        "status": props.get("status"),
        "decidedBy": props.get("decidedBy"),
    }
    return [(action, data)]


_DERIVERS: dict[str, Callable[[Writes, str, Mapping[str, Any]], list[_Draft]]] = {
    ev.SESSION_CREATED: _session_created,
    ev.SESSION_DELETED: _session_deleted,
    ev.MESSAGE_UPDATED: _message_updated,
    ev.PART_UPDATED: _part_updated,
    ev.PERMISSION_ASKED: _permission_asked,
    ev.PERMISSION_REPLIED: _permission_replied,
}
