"""Delivering webhooks without ever holding up a turn.

The bus hands every event to `observe`, which only queues the ones that are notifications (a bounded
queue: when a receiver is so slow that it fills, new notifications are dropped and logged, never
waited for). A task of its own fans each one out to the tenant's endpoints: a delivery row per
endpoint, then a task per delivery that POSTs it, retrying with exponential back-off on the clock
seam (a failed attempt waits `initial_backoff`, then 4x longer each time) until a 2xx answer or
`max_attempts`. Every attempt is written to the delivery log. Deliveries still pending when the
server stopped are resumed at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

import httpx2
import orjson

from agentforge.clock import Clock, now_ms
from agentforge.config.webhooks import WebhookDeliveryConfig, WebhookEndpoint
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.model.webhook import DeliveryAttempt, DeliveryStatus, WebhookDelivery
from agentforge.store.store import Store
from agentforge.webhooks.notifications import notification_type, payload
from agentforge.webhooks.signing import signed_headers
from agentforge.webhooks.target import TargetRefused, check_target

log = logging.getLogger(__name__)

EndpointsOf = Callable[[str], Awaitable[list[WebhookEndpoint]]]

QUEUE_LIMIT: Final = 10_000
CONCURRENT_POSTS: Final = 16
BACKOFF_FACTOR: Final = 4
USER_AGENT: Final = "agentforge-webhooks"


class WebhookDispatcher:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        endpoints_of: EndpointsOf,
        policy: WebhookDeliveryConfig,
        *,
        queue_limit: int = QUEUE_LIMIT,
    ) -> None:
        self._store = store
        self._clock = clock
        self._endpoints_of = endpoints_of
        self._policy = policy
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=queue_limit)
        self._slots = asyncio.Semaphore(CONCURRENT_POSTS)
        self._deliveries: set[asyncio.Task[None]] = set()
        self._http: httpx2.AsyncClient | None = None
        self.dropped = 0

    def observe(self, event: Event) -> None:
        """A bus listener: queue the notifications, never wait."""
        if notification_type(event) is None:
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("webhook queue full: dropped %s of tenant %s", event.type, event.tenant_id)

    async def run(self) -> None:
        """Resume pending deliveries, then fan out notifications until cancelled."""
        try:
            await self._resume()
            while True:
                event = await self._queue.get()
                try:
                    await self._fan_out(event)
                except Exception:
                    log.exception("could not queue the webhooks of %s", event.type)
        finally:
            for task in self._deliveries:
                task.cancel()
            await asyncio.gather(*self._deliveries, return_exceptions=True)
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    def _client(self) -> httpx2.AsyncClient:
        """The HTTP client, made for the first delivery: its transport stack and TLS context (the CA
        bundle loaded) cost megabytes and tens of milliseconds that a server without webhooks should
        not pay at start-up."""
        if self._http is None:
            from agentforge.webhooks.transport import GuardedTransport

            self._http = httpx2.AsyncClient(
                timeout=self._policy.timeout,
                headers={"user-agent": USER_AGENT},
                transport=GuardedTransport(self._policy),  # connects to checked addresses only
                trust_env=False,
            )
        return self._http

    async def _resume(self) -> None:
        try:
            pending = await self._store.pending_webhook_deliveries()
        except Exception:
            log.exception("could not read the pending webhook deliveries")
            return
        for tenant_id, delivery in pending:
            self._start(tenant_id, delivery)

    async def _fan_out(self, event: Event) -> None:
        kind = notification_type(event)
        if kind is None:
            return
        for endpoint in await self._endpoints_of(event.tenant_id):
            if kind not in endpoint.events:
                continue
            now = self._clock.time()
            created = now_ms(self._clock)
            delivery = WebhookDelivery(
                id=ids.ascending("whd"),
                url=endpoint.url,
                event=kind,
                event_id=event.id,
                payload=payload(kind, event, now),
                status="pending",
                next_attempt=created,
                time_created=created,
                time_updated=created,
            )
            await self._store.record_webhook_delivery(event.tenant_id, delivery)
            self._start(event.tenant_id, delivery)

    def _start(self, tenant_id: str, delivery: WebhookDelivery) -> None:
        task = asyncio.create_task(self._deliver(self._client(), tenant_id, delivery))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, client: httpx2.AsyncClient, tenant_id: str, delivery: WebhookDelivery) -> None:
        try:
            while delivery.status == "pending":
                wait = (delivery.next_attempt or 0) / 1000 - self._clock.time()
                if wait > 0:
                    await self._clock.sleep(wait)
                secret = await self._secret(tenant_id, delivery.url)
                if secret is None:
                    self._settle(delivery, "failed")
                    log.warning("webhook %s: %s is no longer configured", delivery.id, delivery.url)
                else:
                    await self._attempt(client, secret, delivery)
                await self._store.record_webhook_delivery(tenant_id, delivery)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook delivery %s failed", delivery.id)

    async def _secret(self, tenant_id: str, url: str) -> str | None:
        for endpoint in await self._endpoints_of(tenant_id):
            if endpoint.url == url:
                return endpoint.secret
        return None

    async def _attempt(self, client: httpx2.AsyncClient, secret: str, delivery: WebhookDelivery) -> None:
        body = orjson.dumps(delivery.payload)
        sent = now_ms(self._clock)
        started = time.monotonic()
        status_code: int | None = None
        error: str | None = None
        try:
            await check_target(delivery.url, self._policy)
            headers = signed_headers(secret, delivery.id, self._clock.time(), body)
            async with self._slots:
                response = await client.post(delivery.url, content=body, headers=headers)
            status_code = response.status_code
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        except TargetRefused as exc:
            error = str(exc)
            self._settle(delivery, "refused")
        except (httpx2.HTTPError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        duration = int((time.monotonic() - started) * 1000)
        delivery.attempts.append(
            DeliveryAttempt(time=sent, status_code=status_code, error=error, duration_ms=duration)
        )
        if delivery.status != "pending":
            return
        if error is None:
            self._settle(delivery, "delivered")
        elif len(delivery.attempts) >= self._policy.max_attempts:
            self._settle(delivery, "failed")
        else:
            delay = self._policy.initial_backoff * BACKOFF_FACTOR ** (len(delivery.attempts) - 1)
            delivery.next_attempt = now_ms(self._clock) + int(delay * 1000)
            delivery.time_updated = now_ms(self._clock)

    def _settle(self, delivery: WebhookDelivery, status: DeliveryStatus) -> None:
        delivery.status = status
        delivery.next_attempt = None
        delivery.time_updated = now_ms(self._clock)
