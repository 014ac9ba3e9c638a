"""Several replicas on one Postgres database (docs/replicas.md): Postgres is the only shared part.

- One loop per session cluster-wide: a run holds the session's run lease (store/cluster.py). A
  prompt for a session whose lease another replica holds tells that replica about its message and
  waits for the run to end (session/runner.py); abort is forwarded the same way.
- Events cross replicas: every event published here is announced on the channel, durable ones by
  position (tenant, session, first..last seq: the others read them from the event log), broadcast
  ones (deltas, status) inline, batched into as few notifications as fit. A replica hands what it
  hears to its own SSE subscribers, in the order it was announced.
- Failover: every `interval` seconds each replica looks for open turns whose lease nobody holds (the
  replica running them died) and closes them like start-up recovery, expiring their pending
  permission requests; then runs the accepted `prompt_async` requests that nobody runs (their
  replica died after answering 204).
- Questions live in memory where their turn runs: replies and listings go over the channel.
- Alone, a replica announces nothing: nobody would hear it (a NOTIFY costs Postgres a transaction
  and its own listener a wake-up: ~1.2 ms of a turn). It counts the other listening replicas every
  second (each holds a lock on its listening connection); one that joins (or listens again after
  losing that connection) says `hello`, and every other answers `welcome` and announces from then
  on. A `hello` or `welcome` from a replica that left events unannounced meanwhile says so, and its
  hearers resync their subscribers; a starting replica waits (a bounded time) for every listening
  one's `welcome` before it serves.
- Bounded and fail-closed: what other replicas say waits in a bounded inbox (a replica that falls
  behind drops the oldest events of the tenant holding most of it and cuts off the SSE subscribers
  that would have had them as lagging: they resume from the log; every piece of a split payload
  says whom it concerns, so a lost piece cuts off only those; an abort is kept longest); a lost
  lease connection stops this replica's runs, since their leases ended with it; a lost channel cuts
  every subscriber off once it listens again (notifications were missed), and so does a gap in a
  sender's counter (a notification that failed, or that it never sent: its outbox is bounded too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from agentforge.bus import Bus
from agentforge.model.events import (
    PART_DELTA,
    SERVER_CONNECTED,
    SERVER_HEARTBEAT,
    STREAM_LAGGED,
    STREAM_UNAUTHORIZED,
    Event,
)
from agentforge.model.permission import PermissionReply
from agentforge.model.session import StatusIdle
from agentforge.permission.service import PermissionService, UnknownPermissionRequestError
from agentforge.runtime.inbox import ANSWERED, ASKED, NOTED, URGENT, Inbox
from agentforge.runtime.recovery import RECOVERY_BATCH, close_turn
from agentforge.session.channels.questions import QuestionService
from agentforge.session.errors import InvalidInputError, NotFoundError
from agentforge.session.events import now_ms
from agentforge.session.prompt import SessionPrompt
from agentforge.session.runner import RunnerRegistry
from agentforge.session.service import SessionService
from agentforge.session.services import SessionServices
from agentforge.store.cluster import NOTIFY_LIMIT, ClusterLink
from agentforge.store.errors import ClusterUnavailableError
from agentforge.store.store import Store

log = logging.getLogger(__name__)

FAILOVER_INTERVAL: Final = 1.0
# How often a waiting replica checks the lease itself (an `ended` notice normally wakes it first).
LEASE_POLL: Final = 0.5
# A queued prompt younger than this is still being started by the replica that accepted it.
QUEUE_GRACE_MS: Final = 2000
# A `run_lease` row whose replica does not hold its lease (it died, or lost the lease with its
# connection) is removed once it is this old, by a sweep this often (the status route ignores it
# meanwhile; the age spares a row whose replica is taking the lease again right now).
LEASE_ROW_EXPIRY_MS: Final = 10_000
LEASE_SWEEP_INTERVAL: Final = 10.0
# How long a replica answering a permission request for another one waits for the decision.
FORWARD_TIMEOUT: Final = 10.0
# Questions are not stored: every other live replica answers a forwarded reply (taken, or not
# held there). One that has not answered after this long (dead, or far behind) may still take it:
# the outcome is then unknown, and said so (503), never reported as failed.
QUESTION_FORWARD_TIMEOUT: Final = 3.0
# How long `GET /question` waits for the other live replicas to list theirs.
QUESTION_LIST_TIMEOUT: Final = 3.0
# How often a replica counts the other listening replicas (alone, it stops announcing; finding
# others it missed the `hello` of, it starts again). A `hello` is answered at once: this bounds only
# a missed one.
ROSTER_INTERVAL: Final = 1.0
# How long a starting replica waits for every other listening replica's `welcome`.
HELLO_WAIT: Final = 2.0
# Notifications heard and not yet handled; beyond this the oldest events are dropped (at ~6 KB each).
INBOX_LIMIT: Final = 2000
# Events published here and not yet announced (the notify connection is slow or stuck); beyond
# this the oldest go, and the others learn of the gap from this replica's counter (store/seal.py).
OUTBOX_LIMIT: Final = 10_000
# A payload in more pieces than this is refused; at most this many senders' payloads half-assembled.
MAX_PIECES: Final = 512
ASSEMBLIES_KEPT: Final = 64
# What `_envelope` adds around the items (the replica id, the kind): batches leave room for it.
_ENVELOPE: Final = 64
# A split payload names at most this many (tenant, session) pairs it concerns; beyond, it says
# "unknown" and a lost piece cuts off everyone (a split payload holds one event: this never happens).
CONCERN_KEPT: Final = 8
# Consecutive deltas of one part's field are announced as one, up to this many characters: the other
# replicas' subscribers get the same text in fewer, larger deltas, and a streamed reply's
# announcements cost a fraction of one per delta (bench/README.md, eighth round).
DELTA_MERGE_CHARS: Final = 2048
_LOCAL_ONLY: Final = frozenset({SERVER_CONNECTED, SERVER_HEARTBEAT, STREAM_LAGGED, STREAM_UNAUTHORIZED})
# What losing a command costs, for what a full inbox keeps (runtime/inbox.py): an abort most of all.
_RANKS: Final = {
    "abort": URGENT,
    "permission": ANSWERED,
    "question": ANSWERED,
    "question-taken": ANSWERED,
    "question-missing": ANSWERED,
    "questions": ASKED,
    "questions-listed": ASKED,
    "hello": ANSWERED,
    "welcome": ANSWERED,
}


class Cluster:
    """This replica's part in the cluster: the session layer's `RunLeases`, the event relay, failover."""

    shared = True  # RunLeases: other replicas run sessions of this database too

    def __init__(self, store: Store, bus: Bus, runners: RunnerRegistry, *, interval: float) -> None:
        self.replica = uuid.uuid4().hex[:12]
        self._store = store
        self._bus = bus
        self._runners = runners
        self._interval = interval
        self._link: ClusterLink | None = None
        self._outbox: deque[Event] = deque()
        self._outbox_ready = asyncio.Event()
        self._inbox = Inbox(INBOX_LIMIT)
        self._fragments: dict[str, _Assembly] = {}  # pieces so far, by sender (oldest first)
        self._ended: dict[str, set[asyncio.Event]] = {}  # who waits for which session's lease
        self._tasks: set[asyncio.Task[None]] = set()
        self._permissions: PermissionService | None = None
        self._questions: QuestionService | None = None
        self._answered: dict[str, _Forwarded] = {}  # forwarded question replies, by ticket
        self._listings: dict[str, _Listing] = {}  # `GET /question` asked of the others, by ticket
        self._resuming: set[str] = set()  # sessions whose queued prompts this replica runs
        # No other live replica: events are not announced. Not until counted: unsure, it announces.
        self._alone = False
        self._unannounced = False  # events went unannounced while alone since the others were told
        self._hellos = 0  # `hello`s heard: a count of the replicas begun before the last is stale
        # Replicas that said `welcome` since this one's `hello`, while it waits for them (bounded:
        # kept only then, by a starting replica).
        self._welcomed: set[str] | None = None
        self._welcome_heard = asyncio.Event()
        self.recovered = 0  # turns closed for dead replicas, for tests and logs
        self.dropped = 0  # notifications dropped for falling behind, for tests and logs
        self.unsent = 0  # events of this replica never announced (outbox full, or too large)
        self.purged = 0  # `run_lease` rows of replicas that no longer hold them, removed
        self.quiet = 0  # events not announced: no other replica was counted, for tests
        # Bounds and waits, as attributes so that tests can shorten them.
        self.outbox_limit = OUTBOX_LIMIT
        self.question_timeout = QUESTION_FORWARD_TIMEOUT
        self.lease_expiry_ms = LEASE_ROW_EXPIRY_MS
        self.sweep_interval = LEASE_SWEEP_INTERVAL
        self.roster_interval = ROSTER_INTERVAL
        self.hello_wait = HELLO_WAIT

    @property
    def link(self) -> ClusterLink:
        if self._link is None:
            raise RuntimeError("the cluster is not open")
        return self._link

    async def start(self) -> None:
        self._link = await self._store.open_cluster_link(self._heard)
        if self._link is None:
            raise RuntimeError("replicas need Postgres")
        self._link.on_leases_lost = self._leases_lost
        self._link.on_gap = self._bus.missed
        self._link.on_rejoined = self._rejoined
        await self._link.join(self.replica)
        self._bus.listen(self._announce)
        self._runners.leases = self
        self._runners.before_release = self._store.barrier
        self._spawn(self._send_loop(), "cluster-send")
        self._spawn(self._receive_loop(), "cluster-receive")
        await self._greet(self.hello_wait)
        self._spawn(self._roster_loop(), "cluster-roster")

    def start_failover(self, services: SessionServices) -> None:
        self._permissions = services.permissions
        services.permissions.forward_reply = self.forward_permission_reply
        services.permissions.shared = True
        self._questions = services.questions
        services.questions.forward = self.forward_question_reply
        services.questions.elsewhere = self.questions_elsewhere
        self._spawn(self._failover_loop(services), "cluster-failover")

    async def close(self) -> None:
        if self._link is not None:
            self._link.on_rejoined = None  # nothing more to greet: this replica is going
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._link is not None:
            await self._link.close()

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- RunLeases -------------------------------------------------------------------------------

    def holds(self, session_id: str) -> bool:
        return self.link.holding(session_id)

    async def acquire(self, session_id: str, tenant_id: str | None = None) -> bool:
        return await self.link.try_lease(session_id, tenant_id)

    async def release(self, session_id: str) -> None:
        await self.link.release(session_id)
        await self._tell("ended", session_id)

    async def held_elsewhere(self, session_id: str) -> bool:
        # The lease is re-entrant on this replica's connection: free or ours both read as free.
        return not await self.link.lease_free(session_id)

    async def tell_input(self, session_id: str) -> None:
        await self._tell("input", session_id)

    async def tell_abort(self, session_id: str) -> None:
        await self._tell("abort", session_id)

    async def wait_released(self, session_id: str, timeout: float | None = None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        ended = asyncio.Event()
        waiting = self._ended.setdefault(session_id, set())
        waiting.add(ended)
        try:
            while True:
                ended.clear()
                if await self.link.lease_free(session_id):
                    return True
                wait = LEASE_POLL if deadline is None else min(LEASE_POLL, deadline - loop.time())
                if wait <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), wait)
        finally:
            waiting.discard(ended)
            if not waiting:
                self._ended.pop(session_id, None)

    async def forward_permission_reply(
        self, tenant_id: str, request_id: str, reply: PermissionReply, message: str | None, user: str
    ) -> bool:
        """A reply for a request pending on another replica: hand it over, wait until it is decided."""
        info = await self._store.permission_request(tenant_id, request_id)
        if info is None or info.status != "pending":
            return False
        notice = {"r": self.replica, "k": "permission", "t": tenant_id, "id": request_id, "reply": reply}
        await self.link.notify([_dumps({**notice, "m": message, "u": user})])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORWARD_TIMEOUT
        while loop.time() < deadline:
            info = await self._store.permission_request(tenant_id, request_id)
            if info is None or info.status != "pending":
                return True
            await asyncio.sleep(LEASE_POLL / 5)
        return False  # nobody waits on it (its replica died: failover expires it)

    async def _reply_here(self, message: dict[str, Any]) -> None:
        if self._permissions is None:
            return
        tenant_id, request_id, reply = message["t"], message["id"], message["reply"]
        with contextlib.suppress(UnknownPermissionRequestError):  # waiting on another replica
            await self._permissions.reply(
                tenant_id, request_id, reply, message["m"], message["u"], forward=False
            )

    async def forward_question_reply(
        self, tenant_id: str, request_id: str, answers: list[list[str]] | None
    ) -> bool:
        """Answers (None: dismiss) for a question waiting on another replica: True once it took
        them, False once every other live replica said it does not hold it; ClusterUnavailableError
        when one did not answer in time (it may still take them: the outcome is unknown)."""
        others = await self.link.replica_count() - 1
        if others <= 0:
            return False  # alone: nobody else can hold it
        ticket = uuid.uuid4().hex
        forwarded = _Forwarded()
        self._answered[ticket] = forwarded
        notice = {"r": self.replica, "k": "question", "t": tenant_id, "id": request_id, "q": ticket}
        try:
            try:
                # Answers may be long; a lost piece only costs this reply (no stream carries it).
                pieces = self._fragment(_dumps({**notice, "a": answers}), [])
            except _TooLarge as exc:
                raise InvalidInputError(f"answers: too long to hand to another replica ({exc})") from None
            await self.link.notify(pieces)
            return await self._forward_outcome(forwarded, others)
        finally:
            self._answered.pop(ticket, None)

    async def _forward_outcome(self, forwarded: _Forwarded, others: int) -> bool:
        """True once a replica took the reply, False once every other live replica (counted again
        then: one may have joined meanwhile) said it does not hold the question."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.question_timeout
        while True:
            forwarded.heard.clear()
            if forwarded.taken:
                return True
            if len(forwarded.missing) >= others:
                others = await self.link.replica_count() - 1
                if len(forwarded.missing) >= others:
                    return False
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ClusterUnavailableError(
                    "another replica did not say in time whether it holds this question; it may still"
                    " take the reply: GET /question shows whether the question still waits"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(forwarded.heard.wait(), remaining)

    async def questions_elsewhere(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's questions waiting on the other live replicas (each answers with its own)."""
        others = await self.link.replica_count() - 1
        if others <= 0:
            return []
        ticket = uuid.uuid4().hex
        listing = _Listing(others)
        self._listings[ticket] = listing
        try:
            await self.link.notify(
                [_dumps({"r": self.replica, "k": "questions", "t": tenant_id, "q": ticket})]
            )
            with contextlib.suppress(TimeoutError):  # a replica that died meanwhile never answers
                await asyncio.wait_for(listing.done.wait(), QUESTION_LIST_TIMEOUT)
            return listing.found
        finally:
            self._listings.pop(ticket, None)

    async def _list_here(self, message: dict[str, Any]) -> None:
        mine = [] if self._questions is None else self._questions.pending(message["t"])
        payload = _dumps({"r": self.replica, "k": "questions-listed", "q": message["q"], "items": mine})
        try:
            pieces = self._fragment(payload, [])
        except _TooLarge as exc:  # the asker waits its 3 s and lists the others' without these
            log.error("cluster: too many questions here to list to another replica (%s)", exc)
            return
        await self.link.notify(pieces)

    async def _answer_here(self, message: dict[str, Any]) -> None:
        tenant_id, request_id, answers = message["t"], message["id"], message["a"]
        if self._questions is None:  # still starting: it holds no question
            taken = False
        elif answers is None:
            taken = self._questions.reject(tenant_id, request_id)
        else:
            taken = self._questions.reply(tenant_id, request_id, answers)
        kind = "question-taken" if taken else "question-missing"  # the asker counts the missing
        await self.link.notify([_dumps({"r": self.replica, "k": kind, "q": message["q"]})])

    async def _tell(self, kind: str, session_id: str) -> None:
        if kind == "ended" and self._alone:
            return  # nobody waits for it (a waiter polls the lease too)
        await self.link.notify([_dumps({"r": self.replica, "k": kind, "s": session_id})])

    # --- the roster: who hears the announcements ----------------------------------------------------

    @property
    def alone(self) -> bool:
        """No other live replica was counted: events are not announced."""
        return self._alone

    async def _greet(self, wait: float) -> None:
        """Count the other listeners. Alone: announce nothing from now on. Not alone: say `hello`
        (the others announce to this replica from their `welcome` on) and wait up to `wait` seconds
        for each of them to say it."""
        hellos = self._hellos
        others = await self.link.others_listening()
        if others < 1:
            if hellos == self._hellos:  # nobody said hello while we counted
                self._alone = True
            return
        welcomed: set[str] = set()
        if wait > 0:
            self._welcomed = welcomed
        try:
            await self._say("hello", self._announcing())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    while len(welcomed) < others:
                        self._welcome_heard.clear()
                        await self._welcome_heard.wait()
        except Exception:  # announcing anyway: the others find this replica when they count
            log.exception("cluster: could not say hello to the other replicas")
            return
        finally:
            self._welcomed = None
        if len(welcomed) < others and wait > 0:
            log.warning(
                "cluster: %d of %d replica(s) did not answer within %.1f s; they announce to this one"
                " once they count it",
                others - len(welcomed),
                others,
                wait,
            )

    def _announcing(self) -> bool:
        """Announce from now on; whether events went unannounced before (the others must resync)."""
        self._alone = False
        unannounced, self._unannounced = self._unannounced, False
        return unannounced

    async def _say(self, kind: str, unannounced: bool) -> None:
        """Say `kind` to the others, with whether events went unannounced (kept for the next word
        should this one not go out)."""
        try:
            await self.link.notify([_dumps({"r": self.replica, "k": kind, "q": unannounced})])
        except BaseException:
            self._unannounced = self._unannounced or unannounced
            raise

    def _rejoined(self) -> None:
        """The listening connection came back: counted again, this replica greets the others (they
        may have stopped announcing while it was not counted)."""
        self._spawn(self._greet_again(), "cluster-greet")

    async def _greet_again(self) -> None:
        try:
            await self._greet(0.0)
        except Exception:
            log.exception("cluster: greeting the other replicas again failed")

    async def _roster_loop(self) -> None:
        while True:
            await asyncio.sleep(self.roster_interval)
            try:
                await self.count_roster()
            except ClusterUnavailableError:
                pass  # the lease connection is down: the mode stays as it was until counted
            except Exception:
                log.exception("cluster: counting the listening replicas failed")

    async def count_roster(self) -> None:
        """Count the other listeners: alone, stop announcing; not alone but silent (a `hello` was
        missed), announce again and say `welcome`, so a replica that missed events resyncs."""
        hellos = self._hellos
        others = await self.link.others_listening()
        if others >= 1:
            if self._alone:
                await self._say("welcome", self._announcing())
        elif hellos == self._hellos:
            self._alone = True

    def _greeted(self, message: dict[str, Any]) -> None:
        """A `hello` or `welcome`: its sender announces, and, when it left events unannounced, every
        subscriber here resyncs from the log. A `hello` is answered with a `welcome`."""
        if message.get("q"):
            self._bus.missed()
        if message.get("k") == "welcome":
            if self._welcomed is not None:
                self._welcomed.add(str(message.get("r")))
                self._welcome_heard.set()
            return
        self._hellos += 1
        # Announcing from now on; the answer goes beside the receiving loop, which it must not hold up.
        self._spawn(self._welcome(self._announcing()), "cluster-welcome")

    async def _welcome(self, unannounced: bool) -> None:
        try:
            await self._say("welcome", unannounced)
        except Exception:
            log.exception("cluster: could not answer a hello")

    # --- events out ------------------------------------------------------------------------------

    def _announce(self, event: Event) -> None:
        """Bus listener: every event published on this replica (remote ones are not re-published)."""
        if event.type in _LOCAL_ONLY:
            return
        if self._alone:
            self.quiet += 1
            self._unannounced = True  # nobody hears it; whoever is counted later resyncs
            return
        if len(self._outbox) >= self.outbox_limit:
            self._outbox.popleft()
            self._unsent()
            if self.unsent & (self.unsent - 1) == 0:
                log.warning("cluster: the channel does not keep up, %d event(s) never announced", self.unsent)
        self._outbox.append(event)
        self._outbox_ready.set()

    def _unsent(self) -> None:
        """An event is never announced (the outbox was full, or it is too large): its counter is
        skipped, so the other replicas see the gap and resync their subscribers."""
        self.unsent += 1
        self.link.skip()

    async def _send_loop(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            events = list(self._outbox)
            self._outbox.clear()
            try:
                await self.link.notify(self._payloads(events))
            except Exception:
                log.exception("cluster: could not announce %d event(s)", len(events))

    def _payloads(self, events: Sequence[Event]) -> list[str]:
        batches: list[tuple[list[Any], list[bytes]]] = []
        items: list[Any] = []
        encoded: list[bytes] = []
        size = 0
        for item in _items(events):
            text = orjson.dumps(item)  # bytes: the limit is Postgres's, in bytes
            if items and size + len(text) > NOTIFY_LIMIT - _ENVELOPE:
                batches.append((items, encoded))
                items, encoded, size = [], [], 0
            items.append(item)
            encoded.append(text)
            size += len(text) + 1
        if items:
            batches.append((items, encoded))
        pieces: list[str] = []
        for items, encoded in batches:
            try:
                pieces.extend(self._fragment(self._envelope(encoded), _concern(items)))
            except _TooLarge as exc:  # one event larger than receivers take (a huge delta)
                log.warning("cluster: an event too large to announce (%s); the others resync", exc)
                self._unsent()
        return pieces

    def _envelope(self, encoded: list[bytes]) -> str:
        """`{"r": replica, "k": "events", "items": [...]}` as orjson writes it, around items each
        encoded once (their sizes decided the batches)."""
        head = _dumps({"r": self.replica, "k": "events", "items": []})[:-2]  # up to its "["
        return head + b",".join(encoded).decode() + "]}"

    def _fragment(self, payload: str, concern: list[list[str | None]] | None) -> list[str]:
        """A payload too big for one notification (one large delta) goes as numbered pieces, each
        saying whom the payload concerns (`concern`: (tenant, session) pairs whose streams carry it,
        None: unknown) so that a receiver losing any piece cuts off only those streams."""
        if len(payload.encode()) <= NOTIFY_LIMIT:
            return [payload]
        whom = len(orjson.dumps(concern)) + 8  # with its key
        step = (NOTIFY_LIMIT - _ENVELOPE - whom) // 6  # characters: at most 6 bytes each once escaped
        pieces = [payload[i : i + step] for i in range(0, len(payload), step)]
        if len(pieces) > MAX_PIECES:  # receivers refuse it: never sent, its loss told as a gap
            raise _TooLarge(f"{len(payload)} characters in {len(pieces)} pieces, at most {MAX_PIECES}")
        return [
            _dumps({"r": self.replica, "k": "piece", "i": index, "n": len(pieces), "w": concern, "d": piece})
            for index, piece in enumerate(pieces)
        ]

    # --- events in -------------------------------------------------------------------------------

    def _heard(self, payload: str) -> None:
        """asyncpg's listener callback: queue what other replicas said, in the order heard."""
        try:
            message = orjson.loads(payload)
        except orjson.JSONDecodeError:
            log.warning("cluster: ignoring a malformed notification")
            return
        if not isinstance(message, dict) or message.get("r") == self.replica:
            return
        dropped = self._inbox.put(message, _tenants(message), _RANKS.get(str(message.get("k")), NOTED))
        if dropped is not None:
            self._dropped(dropped)

    def _dropped(self, message: dict[str, Any]) -> None:
        """This replica falls behind the others and dropped `message` (the inbox chose it): cut off the
        subscribers that would have had its events, as the bus does for a slow subscriber."""
        self.dropped += 1
        if self.dropped & (self.dropped - 1) == 0:
            log.warning("cluster: falling behind, %d notification(s) dropped", self.dropped)
        kind = message.get("k")
        if kind == "events":
            try:
                lost = _stand_ins(message["items"])
            except (KeyError, IndexError, TypeError):
                lost = None  # whom it concerned cannot be told: everyone resyncs (fail closed)
            self._bus.missed(lost)
        elif kind == "piece":  # a part of something: its sender's payload is lost
            self._bus.missed(_whom(message.get("w")))
        elif kind in ("hello", "welcome") and message.get("q"):  # its sender left events unannounced
            self._bus.missed()
        else:
            log.error("cluster: dropped a %r notification, the inbox is full", kind)

    def _leases_lost(self, sessions: set[str]) -> None:
        """The lease connection ended, and every lease with it: stop the runs that held them (fail
        closed: another replica may take them over now)."""
        running = sorted(s for s in sessions if self._runners.is_busy(s))
        if running:
            log.error("cluster: the run leases ended with their connection; stopping %d run(s)", len(running))
        for session_id in running:
            self._spawn(self._abort_here(session_id), f"lease-lost:{session_id}")
        for session_id in sessions.difference(running):
            # Taken ahead for a run about to start: what was read under it may miss what another
            # replica writes before it is taken again, so that run's first read is made again.
            self._runners.note_input(session_id)

    async def _receive_loop(self) -> None:
        while True:
            message = await self._inbox.get()
            try:
                await self._handle(message)
            except Exception:
                log.exception("cluster: could not handle a %r notification", message.get("k"))

    async def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("k")
        if kind == "piece":
            whole = self._assemble(message)
            if whole is not None:
                await self._handle(orjson.loads(whole))
        elif kind == "events":
            for item in message["items"]:
                self._bus.deliver(await self._resolve(item))
        elif kind == "input":
            self._runners.note_input(message["s"])
        elif kind == "permission":
            self._spawn(self._reply_here(message), "cluster-permission")
        elif kind == "question":
            self._spawn(self._answer_here(message), "cluster-question")
        elif kind in ("question-taken", "question-missing"):
            forwarded = self._answered.get(message["q"])
            if forwarded is not None:
                forwarded.add(str(message.get("r")), kind == "question-taken")
        elif kind == "questions":
            self._spawn(self._list_here(message), "cluster-questions")
        elif kind == "questions-listed":
            listing = self._listings.get(message["q"])
            if listing is not None:
                listing.add(message["items"])
        elif kind == "abort":
            self._spawn(self._abort_here(message["s"]), "cluster-abort")
        elif kind == "ended":
            for ended in self._ended.get(message["s"], ()):
                ended.set()
        elif kind in ("hello", "welcome"):
            self._greeted(message)

    def _assemble(self, message: dict[str, Any]) -> str | None:
        """The whole payload once its last piece is here. A payload that cannot be completed cuts off
        the streams it concerns (each piece names them), and only those."""
        sender, index, count = message["r"], message["i"], message["n"]
        held = self._fragments.pop(sender, None)
        if index == 0:
            if held is not None:  # the end of the sender's last payload never came
                self._bus.missed(_whom(held.concern))
            held = _Assembly(message.get("w"))
        elif held is None or len(held.pieces) != index:
            if held is not None:  # a piece of it, or the start of this one, was lost
                self._bus.missed(_whom(held.concern))
            # A piece before this one was lost (dropped, or before we listened).
            self._bus.missed(_whom(message.get("w")))
            return None
        if not 0 < count <= MAX_PIECES:
            log.warning("cluster: refusing a payload of %r pieces", count)
            return None
        held.pieces.append(message["d"])
        if len(held.pieces) < count:
            self._fragments[sender] = held  # last in the order: the oldest assembly goes first
            while len(self._fragments) > ASSEMBLIES_KEPT:
                self._bus.missed(_whom(self._fragments.pop(next(iter(self._fragments))).concern))
            return None
        return "".join(held.pieces)

    async def _resolve(self, item: Any) -> list[Event]:
        """A position range read back from the event log, or an inline broadcast event."""
        if isinstance(item, list):
            tenant_id, session_id, first, last = item
            events = await self._store.events_after(tenant_id, session_id, first - 1, limit=last - first + 1)
            return [event for event in events if event.seq is not None and event.seq <= last]
        return [
            Event(
                type=item["type"],
                properties=item["properties"],
                session_id=item.get("session"),
                tenant_id=item["tenant"],
                id=item["id"],
            )
        ]

    async def _abort_here(self, session_id: str) -> None:
        await self._runners.cancel(session_id)

    # --- failover --------------------------------------------------------------------------------

    async def _failover_loop(self, services: SessionServices) -> None:
        loop = asyncio.get_running_loop()
        swept = loop.time()
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.recover_orphans(services)
                await self.resume_queued(services)
                if loop.time() - swept >= self.sweep_interval:
                    swept = loop.time()
                    await self.purge_stale_leases()
            except Exception:
                log.exception("cluster: failover pass failed")

    async def purge_stale_leases(self) -> int:
        """Remove the `run_lease` rows of replicas that no longer hold those leases; returns how many."""
        purged = await self._store.purge_stale_leases(now_ms() - self.lease_expiry_ms)
        if purged:
            log.info("cluster: removed %d run_lease row(s) of replicas that no longer hold them", purged)
        self.purged += purged
        return purged

    async def recover_orphans(self, services: SessionServices) -> int:
        """Close the open turns whose lease no replica holds (their replica died); returns how many."""
        # Sessions only: the messages are read (under the leases) for the candidates alone.
        candidates = {
            session_id
            for session_id in await self._store.open_turn_sessions(RECOVERY_BATCH)
            if not self._runners.is_busy(session_id)
        }
        held: set[str] = set()
        try:
            for session_id in sorted(candidates):
                if await self.link.try_lease(session_id):
                    held.add(session_id)
                    if self._runners.is_busy(session_id):  # a local run began meanwhile: its turn
                        held.discard(session_id)
                        await self.link.release(session_id)
            return await self._close_turns(services, held) if held else 0
        finally:
            for session_id in held:
                await self.link.release(session_id)

    async def resume_queued(self, services: SessionServices) -> int:
        """Run the accepted prompts whose session no replica runs; returns how many it started."""
        started = 0
        for tenant_id, session_id, message_id in await self._store.queued_prompts(now_ms() - QUEUE_GRACE_MS):
            if session_id in self._resuming or self._runners.is_busy(session_id):
                continue
            if await self.held_elsewhere(session_id):
                continue
            self._resuming.add(session_id)
            self._spawn(self._resume(services, tenant_id, session_id, message_id), f"resume:{session_id}")
            started += 1
        return started

    async def _resume(
        self, services: SessionServices, tenant_id: str, session_id: str, message_id: str
    ) -> None:
        try:
            prompt = SessionPrompt(SessionService(services, tenant_id))
            try:
                session = await prompt.sessions.get(session_id)
            except NotFoundError:
                await self._store.finish_prompts(tenant_id, session_id, message_id)
                return
            log.warning("cluster: running session %s's accepted prompt %s", session_id, message_id)
            await prompt.run_queued(session, message_id)
        finally:
            self._resuming.discard(session_id)

    async def _close_turns(self, services: SessionServices, sessions: set[str]) -> int:
        # Read again under the leases: a run that ended meanwhile completed its own message.
        orphans = [
            (tenant_id, item)
            for tenant_id, item in await self._store.open_assistant_messages(RECOVERY_BATCH)
            if item.info.session_id in sessions
        ]
        await _expire_permissions(services.permissions, sessions)
        now = now_ms()
        writes: list[asyncio.Future[Event]] = []
        for tenant_id, item in orphans:
            writes.extend(close_turn(services.events(tenant_id), item, now))
        await asyncio.gather(*writes)
        for tenant_id, item in orphans:
            services.status.set(tenant_id, item.info.session_id, StatusIdle())
        if orphans:
            log.warning("cluster: closed %d turn(s) of a replica that stopped", len(orphans))
        self.recovered += len(orphans)
        return len(orphans)


class _TooLarge(Exception):
    """A payload in more pieces than receivers accept (`MAX_PIECES`): it is never sent."""


@dataclass(slots=True)
class _Assembly:
    """A sender's payload being put together: whom it concerns (as its first piece said), its pieces
    so far."""

    concern: Any
    pieces: list[str] = field(default_factory=list)


class _Forwarded:
    """Answers to one forwarded question reply so far: whether a replica took it, which ones said
    they do not hold the question."""

    def __init__(self) -> None:
        self.taken = False
        self.missing: set[str] = set()
        self.heard = asyncio.Event()

    def add(self, replica: str, taken: bool) -> None:
        self.taken = self.taken or taken
        if not taken:
            self.missing.add(replica)
        self.heard.set()


class _Listing:
    """Answers to one `questions` notice, complete once every other live replica has sent its list."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.found: list[dict[str, Any]] = []
        self.done = asyncio.Event()

    def add(self, items: list[dict[str, Any]]) -> None:
        self.found.extend(items)
        self.expected -= 1
        if self.expected <= 0:
            self.done.set()


async def _expire_permissions(permissions: PermissionService, sessions: set[str]) -> None:
    expired = await permissions.expire_orphans(sessions=sessions)
    if expired:
        log.warning("cluster: expired %d permission request(s) of a replica that stopped", expired)


def _items(events: Sequence[Event]) -> list[Any]:
    """Consecutive durable events of one session as one position range; consecutive deltas of one
    part's field as one delta (`DELTA_MERGE_CHARS`); the rest inline."""
    items: list[Any] = []
    merging = _MergedDelta()
    for event in events:
        if merging.takes(event):
            continue
        merging.close()
        if event.seq is not None and event.session_id is not None:
            last = items[-1] if items else None
            if (
                isinstance(last, list)
                and last[0] == event.tenant_id
                and last[1] == event.session_id
                and last[3] + 1 == event.seq
            ):
                last[3] = event.seq
                continue
            items.append([event.tenant_id, event.session_id, event.seq, event.seq])
            continue
        item = {
            "type": event.type,
            "properties": event.properties,
            "session": event.session_id,
            "tenant": event.tenant_id,
            "id": event.id,
        }
        items.append(item)
        merging.start(event, item)
    merging.close()
    return items


class _MergedDelta:
    """The announced delta that the deltas following it may still join (`_items`)."""

    def __init__(self) -> None:
        self.first: Event | None = None
        self.item: dict[str, Any] = {}
        self.pieces: list[str] = []
        self.size = 0

    def start(self, event: Event, item: dict[str, Any]) -> None:
        delta = event.properties.get("delta")
        if event.type == PART_DELTA and isinstance(delta, str):
            self.first, self.item, self.pieces, self.size = event, item, [delta], len(delta)

    def takes(self, event: Event) -> bool:
        first = self.first
        if first is None or event.type != PART_DELTA or self.size >= DELTA_MERGE_CHARS:
            return False
        delta = event.properties.get("delta")
        if not isinstance(delta, str) or event.tenant_id != first.tenant_id:
            return False
        if event.session_id != first.session_id or any(
            event.properties.get(key) != first.properties.get(key) for key in ("messageID", "partID", "field")
        ):
            return False
        self.pieces.append(delta)
        self.size += len(delta)
        return True

    def close(self) -> None:
        """Write the joined text into the item (a copy of the first event's properties: the local
        subscribers share those)."""
        if self.first is not None and len(self.pieces) > 1:
            self.item["properties"] = {**self.first.properties, "delta": "".join(self.pieces)}
        self.first = None


def _stand_ins(items: list[Any]) -> list[Event]:
    """What subscribers would have got from dropped items: enough to tell whom they concern."""
    return [
        Event(type=STREAM_LAGGED, properties={}, tenant_id=item[0], session_id=item[1])
        if isinstance(item, list)
        else Event(type=item["type"], properties={}, tenant_id=item["tenant"], session_id=item.get("session"))
        for item in items
    ]


def _concern(items: list[Any]) -> list[list[str | None]] | None:
    """The (tenant, session) pairs whose streams carry `items` (session None: tenant-wide events);
    None (unknown: everyone) beyond `CONCERN_KEPT`."""
    pairs: dict[tuple[str, str | None], None] = {}
    for item in items:
        pair = (item[0], item[1]) if isinstance(item, list) else (item["tenant"], item.get("session"))
        pairs[pair] = None
    if len(pairs) > CONCERN_KEPT:
        return None
    return [[tenant, session] for tenant, session in pairs]


def _pairs(concern: Any) -> list[tuple[str, str | None]] | None:
    """The (tenant, session) pairs a piece says its payload concerns; None (unknown: everyone) when
    they are not readable (fail closed: cutting off too many streams costs a resync, too few loses
    events)."""
    if not isinstance(concern, list):
        return None
    pairs: list[tuple[str, str | None]] = []
    for pair in concern:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and (pair[1] is None or isinstance(pair[1], str))
        ):
            return None
        pairs.append((pair[0], pair[1]))
    return pairs


def _whom(concern: Any) -> list[Event] | None:
    """Stand-ins for the events of a payload lost in pieces: enough to tell whom they concern."""
    pairs = _pairs(concern)
    if pairs is None:
        return None
    return [
        Event(type=STREAM_LAGGED, properties={}, tenant_id=tenant, session_id=session)
        for tenant, session in pairs
    ]


def _tenants(message: dict[str, Any]) -> frozenset[str] | None:
    """The tenants whose streams a notification feeds, for the inbox's fair share; None: a command
    (never dropped while anything else can be)."""
    kind = message.get("k")
    if kind == "piece":
        return frozenset(tenant for tenant, _session in _pairs(message.get("w")) or ())
    if kind != "events":
        return None
    try:
        return frozenset(item[0] if isinstance(item, list) else item["tenant"] for item in message["items"])
    except (KeyError, IndexError, TypeError):  # unreadable: droppable, charged to nobody
        return frozenset()


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()
