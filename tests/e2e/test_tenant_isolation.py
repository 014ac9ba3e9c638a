"""Tenant isolation proven through HTTP: two tenants with API keys on one live server that requires
auth. Tenant A leaves a turn waiting on a permission, another on a question, and a file in its
workspace; tenant B then tries every route that takes an id with A's ids. Each answer must be the
404 a made-up id gets, byte for byte (but for the id itself), and nothing of A's may change. B's
listings, event streams and tools never show anything of A's.

Routes come from the OpenAPI spec, so a route added later is probed without editing this file; a
path parameter this file does not know fails the test until it is taught what the parameter names.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import orjson

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import ADMIN, MEMBER
from agentforge.model.ids import Prefix, ascending, descending
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply
from tests.sandboxing import python_readable

TENANT_A = "acme"
TENANT_B = "globex"
A_FILE = "launch-plan.txt"
A_SECRET = "acme launch codes: 7-7-4-1\n"
A_TITLE = "acme roadmap"
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which launch window?",
        "header": "Window",
        "options": [{"label": "Dawn", "description": "early"}, {"label": "Dusk", "description": "late"}],
    }
]
NOT_LISTINGS = {
    "/event",
    "/global/event",  # streams: read in the event tests
    "/file/content",  # reads one file: probed with A's paths below
    "/global/health",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/metrics",  # server-wide numbers: the operator's token only, never a tenant's key (below)
}
# Listings that need a query parameter: what B asks them for.
LISTING_PARAMS: dict[str, dict[str, str]] = {
    "/find": {"pattern": "launch"},
    "/find/file": {"query": "launch"},
    "/experimental/tool": {"provider": "fake", "model": "test-model"},
}
A_MCP_SERVER = "acme-echo"
ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "echo_server.py"

# A valid body for each route that takes one, `{param}` standing for that path parameter's value: a
# body FastAPI rejects would answer 422 to both probes and prove nothing. Routes missing here get a
# body built from their schema (`example_body`).
BODIES: dict[tuple[str, str], Any] = {
    ("PATCH", "/session/{session_id}"): {"title": "taken over"},
    ("POST", "/session/{session_id}/message"): {"parts": [{"type": "text", "text": "hand it over"}]},
    ("POST", "/session/{session_id}/prompt_async"): {"parts": [{"type": "text", "text": "hand it over"}]},
    ("POST", "/session/{session_id}/command"): {"command": "init", "arguments": ""},
    ("POST", "/session/{session_id}/shell"): {"agent": "build", "command": "cat launch-plan.txt"},
    ("POST", "/session/{session_id}/fork"): {},
    ("POST", "/session/{session_id}/summarize"): {"providerID": "fake", "modelID": "test-model"},
    ("POST", "/permission/{request_id}/reply"): {"reply": "always"},
    ("POST", "/session/{session_id}/permissions/{permission_id}"): {"response": "always"},
    ("POST", "/question/{request_id}/reply"): {"answers": [["Dawn"]]},
    ("PATCH", "/session/{session_id}/message/{message_id}/part/{part_id}"): {
        "id": "{part_id}",
        "sessionID": "{session_id}",
        "messageID": "{message_id}",
        "type": "text",
        "text": "rewritten by someone else",
    },
}


def text_body(text: str) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": text}]}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Tenant:
    name: str
    headers: dict[str, str]
    client: httpx2.AsyncClient


@dataclass
class Forge:
    live: LiveServer
    a: Tenant
    b: Tenant
    spec: dict[str, Any]
    readers: list[asyncio.Task[None]] = field(default_factory=list)  # event streams to end on exit


async def _tenant(live: LiveServer, name: str, stack: contextlib.AsyncExitStack) -> Tenant:
    # Admins of their own tenant: the strongest caller a tenant has, and the one that may read /audit.
    minted = mint_api_key(name, "isolation-test", frozenset({MEMBER, ADMIN}), "test")
    await live.runtime.store.create_api_key(minted.stored)
    headers = bearer(minted.token)
    client = httpx2.AsyncClient(base_url=live.url, headers=headers, timeout=30)
    await stack.enter_async_context(client)
    return Tenant(name, headers, client)


@contextlib.asynccontextmanager
async def two_tenants(
    tmp_path: Path, fake: FakeOpenAI, database_url: str, *, b_may_reach: Path | None = None
) -> AsyncIterator[Forge]:
    """A live server requiring auth, tenants A and B with an admin key each. `b_may_reach`: a directory
    the server config grants B beyond its workspace (else every outside path is refused outright)."""
    config = {**fake_provider_config(fake), "auth": {"required": True}, "permission": {"bash": "ask"}}
    tenancy: dict[str, Any] = {"shell": "*"}  # the probes run bash, the shell route and terminals
    # A has an MCP server of its own, whose name B probes the MCP routes with.
    echo = {"type": "local", "command": [sys.executable, str(ECHO_SERVER)]}
    # And a webhook: its delivery (refused: a loopback receiver) is an id B probes the log routes with.
    hook = {"url": "http://127.0.0.1:9/hook", "secret": "whsec_" + "A" * 32, "events": ["session.created"]}
    tenancy["overlays"] = {TENANT_A: {"mcp": {A_MCP_SERVER: echo}, "webhooks": [hook]}}
    if b_may_reach is not None:
        tenancy["external_directories"] = {TENANT_B: [str(b_may_reach)]}
    config["tenancy"] = tenancy
    config["sandbox"] = python_readable()  # A's MCP server is a Python script
    async with (
        start_live_server(tmp_path, fake, config, database_url=database_url) as live,
        contextlib.AsyncExitStack() as stack,
    ):
        a = await _tenant(live, TENANT_A, stack)
        b = await _tenant(live, TENANT_B, stack)
        spec = (await live.client.get("/openapi.json")).json()
        forge = Forge(live, a, b, spec)
        try:
            yield forge
        finally:
            for reader in forge.readers:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, httpx2.HTTPError):
                    await reader


# -- tenant A's state ------------------------------------------------------------------------------------


@dataclass
class AState:
    """A's ids, by kind, and where A's file lies."""

    sessions: list[str]
    messages: list[tuple[str, str]]  # (session, message)
    parts: list[tuple[str, str, str]]  # (session, message, part)
    permission: str
    question: str
    file: Path
    waiting_part: tuple[str, str, str]  # the bash call waiting on the permission
    project: str
    pty: str  # a terminal of A's, its shell running
    delivery: str  # a webhook delivery of A's
    events: EventCollector = field(default_factory=EventCollector)

    def ids(self) -> set[str]:
        return {
            *self.sessions,
            *(m for _, m in self.messages),
            *(p for _, _, p in self.parts),
            self.permission,
            self.question,
            self.project,
            self.pty,
            self.delivery,
        }

    def markers(self) -> list[bytes]:
        """What must never appear in anything B receives."""
        texts = [*self.ids(), A_SECRET.strip(), A_TITLE, str(self.file.parent)]
        return [text.encode() for text in texts]


async def _turn_waiting_on_permission(forge: Forge, events: EventCollector) -> tuple[str, str]:
    """A's first session: the turn writes A's file, then waits on a bash permission."""
    a = forge.a.client
    sid = (await a.post("/session", json={"title": A_TITLE})).json()["id"]
    forge.live.fake.enqueue(
        call("write", {"filePath": A_FILE, "content": A_SECRET}),
        call("bash", {"command": f"cat {A_FILE}", "description": "Show the plan"}),
    )
    started = await a.post(f"/session/{sid}/prompt_async", json=text_body("plan"))
    assert started.status_code == 204, started.text
    asked = await events.wait_for(lambda f: f.type == "permission.asked")
    return sid, asked.properties["id"]


async def _turn_waiting_on_question(forge: Forge, events: EventCollector) -> tuple[str, str]:
    a = forge.a.client
    sid = (await a.post("/session", json={"title": f"{A_TITLE} 2"})).json()["id"]
    forge.live.fake.enqueue(call("question", {"questions": QUESTIONS}))
    started = await a.post(f"/session/{sid}/prompt_async", json=text_body("ask"))
    assert started.status_code == 204, started.text
    asked = await events.wait_for(lambda f: f.type == "question.asked")
    return sid, asked.properties["id"]


async def _a_delivery(forge: Forge) -> str:
    """The id of A's first webhook delivery (written in the background once A created a session)."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        deliveries = (await forge.a.client.get("/webhook/delivery")).json()
        if deliveries:
            return str(deliveries[0]["id"])
        assert asyncio.get_running_loop().time() < deadline, "A's webhook delivery was never logged"
        await asyncio.sleep(0.02)


async def set_up_tenant_a(forge: Forge) -> AState:
    events = EventCollector()
    await events.start(forge.live.client, "/event", **forge.a.headers)
    first, permission = await _turn_waiting_on_permission(forge, events)
    second, question = await _turn_waiting_on_question(forge, events)
    messages: list[tuple[str, str]] = []
    parts: list[tuple[str, str, str]] = []
    waiting: list[tuple[str, str, str]] = []
    for sid in (first, second):
        for item in (await forge.a.client.get(f"/session/{sid}/message")).json():
            messages.append((sid, item["info"]["id"]))
            for part in item["parts"]:
                parts.append((sid, item["info"]["id"], part["id"]))
                if part["type"] == "tool" and part["tool"] == "bash":
                    waiting.append(parts[-1])
    workspace = forge.live.settings.data_dir / "tenants" / TENANT_A / "workspace"
    file = workspace / A_FILE
    project = (await forge.a.client.get("/project/current")).json()["id"]
    terminal = await forge.a.client.post("/pty", json={"command": "/bin/sh", "title": A_TITLE})
    assert terminal.status_code == 200, terminal.text
    state = AState(
        [first, second],
        messages,
        parts,
        permission,
        question,
        file,
        waiting[0],
        project,
        terminal.json()["id"],
        await _a_delivery(forge),
        events,
    )
    assert state.file.read_text() == A_SECRET
    assert (await forge.a.client.get("/mcp")).json() == {A_MCP_SERVER: {"status": "connected"}}
    return state


async def snapshot_of_a(forge: Forge, state: AState) -> dict[str, Any]:
    """Everything A can read about its own work, and its workspace's files."""
    paths = ["/session", "/session/status", "/permission", "/question", "/mcp", "/pty", "/project"]
    for sid in state.sessions:
        paths += [f"/session/{sid}{suffix}" for suffix in ("", "/message", "/todo", "/children")]
    paths += [f"/session/{sid}/message/{mid}" for sid, mid in state.messages]
    seen: dict[str, Any] = {}
    for path in paths:
        response = await forge.a.client.get(path)
        seen[path] = (response.status_code, response.json())
    workspace = state.file.parent
    seen["files"] = {p.name: p.read_bytes() for p in sorted(workspace.rglob("*")) if p.is_file()}
    return seen


# -- probes ----------------------------------------------------------------------------------------------

ID_PREFIXES: dict[str, Prefix] = {
    "session": "ses",
    "message": "msg",
    "part": "prt",
    "permission": "per",
    "question": "que",
    "pty": "pty",
    "webhook_delivery": "whd",
}
# Kinds whose ids are not prefixed ids: a project's is 40 hex digits, an MCP server's its name.
ID_KINDS = [*ID_PREFIXES, "project", "mcp"]


NAMED_PARAMS = {
    "session_id": "session",
    "message_id": "message",
    "part_id": "part",
    "permission_id": "permission",
    "pty_id": "pty",
    "project_id": "project",
    "delivery_id": "webhook_delivery",
}


def id_kind(route: str, param: str) -> str:
    """What a path parameter names; an unknown one fails loudly so a new route is never skipped."""
    if param in NAMED_PARAMS:
        return NAMED_PARAMS[param]
    if param == "request_id" and route.startswith("/permission/"):
        return "permission"
    if param == "request_id" and route.startswith("/question/"):
        return "question"
    if param == "name" and route.startswith("/mcp/"):
        return "mcp"
    raise AssertionError(f"{route}: path parameter {param!r} is new; teach id_kind what it names")


def made_up_id(kind: str) -> str:
    """An id of the right shape that nobody has: sessions use descending ids, the rest ascending."""
    if kind == "project":
        return secrets.token_hex(20)
    if kind == "mcp":
        return "made-up-server"
    prefix = ID_PREFIXES[kind]
    return descending(prefix) if kind == "session" else ascending(prefix)


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def example_body(spec: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The smallest value the schema accepts: required properties only, the first of any choice."""
    schema = _resolve(spec, schema)
    for choice in ("oneOf", "anyOf"):
        if choice in schema:
            options = [s for s in schema[choice] if s.get("type") != "null"]
            return example_body(spec, options[0])
    if "const" in schema or "enum" in schema:
        return schema.get("const", (schema.get("enum") or [None])[0])
    kind = schema.get("type", "object")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example_body(spec, properties[name]) for name in schema.get("required", [])}
    if kind == "array":
        return [example_body(spec, schema["items"])] if schema.get("minItems") else []
    return {"string": "x", "integer": max(1, schema.get("minimum", 1)), "number": 1, "boolean": False}[kind]


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {key: _fill(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, ids) for item in value]
    return value


def body_for(spec: dict[str, Any], method: str, route: str, ids: dict[str, str]) -> Any:
    operation = spec["paths"][route][method.lower()]
    if "requestBody" not in operation:
        return None
    template = BODIES.get((method, route))
    if template is None:
        template = example_body(spec, operation["requestBody"]["content"]["application/json"]["schema"])
    return _fill(template, ids)


@dataclass
class Probe:
    method: str
    route: str
    foreign: dict[str, str]  # path parameter -> A's id (or B's own session)
    unknown: dict[str, str]  # the same with every A id replaced by a made-up one


def id_routes(spec: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    routes: list[tuple[str, str, list[str]]] = []
    for route, operations in spec["paths"].items():
        params = re.findall(r"\{(\w+)\}", route)
        routes.extend((method.upper(), route, params) for method in operations if params)
    return routes


def _a_ids_for(state: AState) -> dict[str, str]:
    sid, mid, pid = state.waiting_part  # session, message and part that belong together
    return {
        "session": sid,
        "message": mid,
        "part": pid,
        "permission": state.permission,
        "question": state.question,
        "pty": state.pty,
        "project": state.project,
        "mcp": A_MCP_SERVER,
        "webhook_delivery": state.delivery,
    }


# Which of B's own ids a probe keeps, the rest being A's: a lookup that checks an id but not the
# session (or message) it belongs to answers differently when the parent is B's own.
B_OWN_PARENTS: list[tuple[str, ...]] = [(), ("session",), ("session", "message")]


def probes(spec: dict[str, Any], state: AState, b_ids: dict[str, str]) -> list[Probe]:
    """Every id route with A's ids, and again under each of B's own parents it has."""
    a_ids = _a_ids_for(state)
    made_up = {kind: made_up_id(kind) for kind in ID_KINDS}
    found = []
    for method, route, params in id_routes(spec):
        kinds = {param: id_kind(route, param) for param in params}
        for own in B_OWN_PARENTS:
            if not set(own) <= set(kinds.values()) or set(kinds.values()) <= set(own):
                continue
            foreign = {param: b_ids[kind] if kind in own else a_ids[kind] for param, kind in kinds.items()}
            unknown = {param: b_ids[kind] if kind in own else made_up[kind] for param, kind in kinds.items()}
            found.append(Probe(method, route, foreign, unknown))
    return found


async def b_own_ids(forge: Forge) -> dict[str, str]:
    """B's own session, with one turn in it: its user message."""
    sid = (await forge.b.client.post("/session", json={"title": "globex own"})).json()["id"]
    forge.live.fake.enqueue(reply("globex here"))
    answered = await forge.b.client.post(f"/session/{sid}/message", json=text_body("hi"))
    assert answered.status_code == 200, answered.text
    user = (await forge.b.client.get(f"/session/{sid}/message")).json()[0]
    assert user["info"]["role"] == "user"
    return {"session": sid, "message": user["info"]["id"]}


async def send(forge: Forge, method: str, route: str, ids: dict[str, str]) -> httpx2.Response:
    """The request as B sends it."""
    body = body_for(forge.spec, method, route, ids)
    return await forge.b.client.request(method, route.format(**ids), json=body)


def without_ids(content: bytes, probe: Probe) -> bytes:
    """The answer to A's ids with each of them written as the made-up id it stands against."""
    for param, value in probe.foreign.items():
        content = content.replace(value.encode(), probe.unknown[param].encode())
    return content


# -- event streams ---------------------------------------------------------------------------------------


@dataclass
class RawStream:
    """One `GET /event` read to its end, kept as the bytes that arrived."""

    status: int = 0
    body: bytearray = field(default_factory=bytearray)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def events(self) -> list[dict[str, Any]]:
        lines = bytes(self.body).splitlines()
        return [orjson.loads(line[len(b"data: ") :]) for line in lines if line.startswith(b"data: ")]

    def without_event_ids(self) -> list[dict[str, Any]]:
        """The events as they would compare across streams: every event gets a fresh id."""
        return [{key: value for key, value in event.items() if key != "id"} for event in self.events()]


async def open_stream(forge: Forge, tenant: Tenant, path: str, **headers: str) -> RawStream:
    stream = RawStream()

    async def read() -> None:
        async with tenant.client.stream("GET", path, headers=headers, timeout=None) as response:
            stream.status = response.status_code
            async for chunk in response.aiter_bytes():
                stream.body.extend(chunk)
                if b"server.connected" in stream.body:
                    stream.connected.set()
        stream.connected.set()

    stream.task = asyncio.create_task(read())
    forge.readers.append(stream.task)
    await asyncio.wait_for(stream.connected.wait(), 10)
    return stream


async def finish_streams(forge: Forge, streams: list[RawStream]) -> None:
    """End every subscription as shutdown does: each stream first drains what its subscription
    had taken, so an event of A's that got into one of B's streams is in its bytes."""
    forge.live.runtime.bus.close_all()
    for stream in streams:
        assert stream.task is not None
        await asyncio.wait_for(stream.task, 10)


# -- the tests -------------------------------------------------------------------------------------------


async def test_another_tenants_ids_answer_like_ids_that_do_not_exist_and_change_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with two_tenants(tmp_path, fake_openai, database_url) as forge:
        b_everything = await open_stream(forge, forge.b, "/event")
        state = await set_up_tenant_a(forge)
        b_ids = await b_own_ids(forge)
        before = await snapshot_of_a(forge, state)

        checked = 0
        for probe in probes(forge.spec, state, b_ids):
            foreign = await send(forge, probe.method, probe.route, probe.foreign)
            missing = await send(forge, probe.method, probe.route, probe.unknown)
            where = (probe.method, probe.route, probe.foreign)
            assert foreign.status_code == 404, (where, foreign.text)
            assert without_ids(foreign.content, probe) == missing.content, (where, foreign.text, missing.text)
            assert foreign.headers["content-type"] == missing.headers["content-type"], where
            checked += 1
        # 34 id operations today (21 of sessions, 8 of terminals, 3 of MCP servers...), 5 again under
        # B's session, 2 under its message.
        assert checked >= 41
        await _ids_in_bodies_answer_like_unknown_ids(forge, state, b_ids)

        assert await snapshot_of_a(forge, state) == before
        assert (await forge.a.client.get("/permission")).json()[0]["id"] == state.permission
        await _a_finishes_its_turns(forge, state)
        await finish_streams(forge, [b_everything])
        _assert_nothing_of_a(b_everything, state)
        assert b_ids["session"].encode() in b_everything.body  # the stream did deliver B's own events


async def _ids_in_bodies_answer_like_unknown_ids(forge: Forge, state: AState, b_ids: dict[str, str]) -> None:
    """Ids B names in a request body or query: a child of A's session, a fork, revert or diff of B's own
    session at A's message."""
    a_session, a_message = state.messages[0]
    cases = [
        ("/session", {"parentID": a_session}, {"parentID": made_up_id("session")}),
        (f"/session/{b_ids['session']}/fork", {"messageID": a_message}, {"messageID": made_up_id("message")}),
        (
            f"/session/{b_ids['session']}/revert",
            {"messageID": a_message},
            {"messageID": made_up_id("message")},
        ),
    ]
    for path, foreign_body, unknown_body in cases:
        foreign = await forge.b.client.post(path, json=foreign_body)
        missing = await forge.b.client.post(path, json=unknown_body)
        [(a_id, unknown_id)] = zip(foreign_body.values(), unknown_body.values(), strict=True)
        assert foreign.status_code == 404, (path, foreign.text)
        assert foreign.content.replace(a_id.encode(), unknown_id.encode()) == missing.content, path
    unknown_id = made_up_id("message")
    diff = f"/session/{b_ids['session']}/diff"
    foreign = await forge.b.client.get(diff, params={"messageID": a_message})
    missing = await forge.b.client.get(diff, params={"messageID": unknown_id})
    assert foreign.status_code == 404, foreign.text
    assert foreign.content.replace(a_message.encode(), unknown_id.encode()) == missing.content


async def _a_finishes_its_turns(forge: Forge, state: AState) -> None:
    """A's waiting turns still answer to A: B's probes neither answered nor ended them."""
    first, second = state.sessions
    forge.live.fake.enqueue(reply("The plan is shown."))
    answered = await forge.a.client.post(f"/permission/{state.permission}/reply", json={"reply": "once"})
    assert answered.status_code == 200, answered.text
    await state.events.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == first)
    forge.live.fake.enqueue(reply("Dawn it is."))
    answered = await forge.a.client.post(f"/question/{state.question}/reply", json={"answers": [["Dawn"]]})
    assert answered.status_code == 200, answered.text
    await state.events.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == second)
    await state.events.stop()
    bash_part = next(
        part
        for item in (await forge.a.client.get(f"/session/{first}/message")).json()
        for part in item["parts"]
        if part["type"] == "tool" and part["tool"] == "bash"
    )
    assert bash_part["state"]["status"] == "completed"
    assert A_SECRET.strip() in bash_part["state"]["output"]


def _assert_nothing_of_a(stream: RawStream, state: AState) -> None:
    assert stream.status == 200
    for marker in state.markers():
        assert marker not in stream.body, marker
    assert all(event["type"] != "permission.asked" for event in stream.events())


async def test_listings_never_include_another_tenants_items(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with two_tenants(tmp_path, fake_openai, database_url) as forge:
        state = await set_up_tenant_a(forge)
        await forge.b.client.post("/session", json={"title": "globex own"})
        # A sees its own items where B looks: the markers below are real.
        assert state.permission in (await forge.a.client.get("/permission")).text
        assert state.question in (await forge.a.client.get("/question")).text
        assert state.sessions[0] in (await forge.a.client.get("/session")).text

        listings = [
            route
            for route, operations in forge.spec["paths"].items()
            if "get" in operations and "{" not in route and route not in NOT_LISTINGS
        ]
        assert {"/session", "/session/status", "/permission", "/question", "/audit"} <= set(listings)
        assert {"/file", "/find", "/find/file", "/file/status", "/pty", "/mcp", "/project"} <= set(listings)
        queries = [
            f"/session?search={A_TITLE}",
            f"/session?directory={state.file.parent}",
            "/session?roots=true",
            f"/session?start=0&search={A_TITLE.split()[0]}",
        ]
        for path in [*listings, *queries]:
            response = await forge.b.client.get(path, params=LISTING_PARAMS.get(path))
            assert response.status_code == 200, (path, response.text)
            for marker in state.markers():
                assert marker not in response.content, (path, marker)
        assert (await forge.b.client.get("/metrics")).status_code == 403
        # A's file, named any way, is outside B's workspace.
        for named in (str(state.file), f"../../{TENANT_A}/workspace/{A_FILE}"):
            refused = await forge.b.client.get("/file/content", params={"path": named})
            assert refused.status_code == 403 and A_SECRET.strip() not in refused.text, refused.text
        sessions = (await forge.b.client.get("/session")).json()
        assert [s["title"] for s in sessions] == ["globex own"]
        assert (await forge.b.client.get("/permission")).json() == []
        assert (await forge.b.client.get("/question")).json() == []
        assert (await forge.b.client.get("/session/status")).json() == {}  # A's two turns are busy
        # B's audit chain is its own: numbered from 1 without gaps, so it counts none of A's work.
        entries = (await forge.b.client.get("/audit")).json()["entries"]
        assert {entry["tenant"] for entry in entries} == {TENANT_B}
        assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
        await state.events.stop()
        # A's turns wait for a person: stopped, they no longer hold the shutdown for its grace.
        for session_id in state.sessions:
            await forge.a.client.post(f"/session/{session_id}/abort")


async def test_another_tenants_events_never_reach_a_subscriber_live_or_resumed(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with two_tenants(tmp_path, fake_openai, database_url) as forge:
        everything = await open_stream(forge, forge.b, "/event")
        instance_wide = await open_stream(forge, forge.b, "/global/event")
        a_events = EventCollector()
        await a_events.start(forge.live.client, "/event", **forge.a.headers)
        sid = (await forge.a.client.post("/session", json={"title": A_TITLE})).json()["id"]
        unknown = made_up_id("session")
        for_a_session = await open_stream(forge, forge.b, f"/event?sessionID={sid}")
        for_unknown = await open_stream(forge, forge.b, f"/event?sessionID={unknown}")
        assert for_a_session.status == for_unknown.status == 200
        assert for_a_session.without_event_ids() == for_unknown.without_event_ids()

        forge.live.fake.enqueue(
            call("write", {"filePath": A_FILE, "content": A_SECRET}),
            call("bash", {"command": f"cat {A_FILE}", "description": "Show the plan"}),
        )
        await forge.a.client.post(f"/session/{sid}/prompt_async", json=text_body("go"))
        asked = await a_events.wait_for(lambda f: f.type == "permission.asked")
        # Resuming from the start of A's session replays nothing: like a session that does not exist.
        from_start = {"Last-Event-ID": "0"}
        resumed = await open_stream(forge, forge.b, f"/event?sessionID={sid}", **from_start)
        resumed_unknown = await open_stream(forge, forge.b, f"/event?sessionID={unknown}", **from_start)
        after = await open_stream(forge, forge.b, f"/event?sessionID={sid}&after=0")
        replayed = resumed.without_event_ids()
        assert replayed == resumed_unknown.without_event_ids() == after.without_event_ids()

        forge.live.fake.enqueue(reply("shown"))
        await forge.a.client.post(f"/permission/{asked.properties['id']}/reply", json={"reply": "once"})
        await a_events.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == sid)
        b_session = (await forge.b.client.post("/session")).json()["id"]
        a_frames = len(a_events.frames)
        await a_events.stop()
        streams = [everything, instance_wide, for_a_session, for_unknown, resumed, resumed_unknown, after]
        await finish_streams(forge, streams)

        assert a_frames > 10  # A's turn did publish: created, messages, parts, permission, idle
        a_ids = [sid.encode(), asked.properties["id"].encode(), A_SECRET.strip().encode(), A_TITLE.encode()]
        for stream in streams:
            assert stream.status == 200
            for marker in a_ids:
                assert marker not in stream.body, marker
        assert [e["type"] for e in for_a_session.events()] == ["server.connected"]
        assert [e["type"] for e in resumed.events()] == ["server.connected"]
        assert b_session.encode() in everything.body
        assert b_session.encode() in instance_wide.body


async def _a_writes_its_file(forge: Forge) -> Path:
    sid = (await forge.a.client.post("/session", json={"title": A_TITLE})).json()["id"]
    forge.live.fake.enqueue(call("write", {"filePath": A_FILE, "content": A_SECRET}), reply("written"))
    answered = await forge.a.client.post(f"/session/{sid}/message", json=text_body("write the plan"))
    assert answered.status_code == 200, answered.text
    file = forge.live.settings.data_dir / "tenants" / TENANT_A / "workspace" / A_FILE
    assert file.read_text() == A_SECRET
    return file


async def _b_tool_part(forge: Forge, sid: str) -> dict[str, Any]:
    history = (await forge.b.client.get(f"/session/{sid}/message")).json()
    part: dict[str, Any] = next(p for item in history for p in item["parts"] if p["type"] == "tool")
    return part


def _tool_parts(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for item in history for part in item["parts"] if part["type"] == "tool"]


async def test_a_tenants_tools_never_reach_another_tenants_files_whatever_is_approved(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    # Even with the whole test directory granted by the server config and every outside path approved
    # by B, no rule or person may open A's roots, the server's data, or a directory holding them (a
    # grep there would walk into A's workspace).
    async with two_tenants(tmp_path, fake_openai, database_url, b_may_reach=tmp_path) as forge:
        file = await _a_writes_its_file(forge)
        sid = (await forge.b.client.post("/session")).json()["id"]
        approve_outside = [{"permission": "external_directory", "pattern": "*", "action": "allow"}]
        patched = await forge.b.client.patch(f"/session/{sid}", json={"permission": approve_outside})
        assert patched.status_code == 200, patched.text
        database_file = forge.live.settings.data_dir / "agentforge.db"
        forge.live.fake.enqueue(
            call("read", {"filePath": str(file)}),
            call("write", {"filePath": str(file), "content": "globex was here\n"}),
            call("read", {"filePath": str(database_file)}),
            call("grep", {"pattern": "launch codes", "path": str(tmp_path)}),
            reply("nothing for me there"),
        )
        answered = await forge.b.client.post(f"/session/{sid}/message", json=text_body("take A's plan"))
        assert answered.status_code == 200, answered.text

        history = (await forge.b.client.get(f"/session/{sid}/message")).json()
        read, write, database, grep = _tool_parts(history)
        for part, where in [(read, file), (write, file), (database, forge.live.settings.data_dir)]:
            assert part["state"]["status"] == "error", part
            assert part["state"]["error"].startswith(f"Refusing to access {where}"), part
            assert "belongs to the server or to another tenant" in part["state"]["error"]
        assert grep["state"]["status"] == "error"
        if database_file.exists():  # SQLite: no tenant's boundary holds the database, wherever it lies
            refusal = f"Refusing to access {tmp_path}: it contains {database_file}"
            assert grep["state"]["error"].startswith(refusal)
            turns = 4  # a boundary refusal ends the turn
        else:
            assert grep["state"]["error"] == (
                f"Refusing to access {tmp_path}: it contains the server's or other tenants' files."
            )
            turns = 5  # fence refusals do not end a turn
        assert A_SECRET.strip().encode() not in (await forge.b.client.get(f"/session/{sid}/message")).content
        assert file.read_text() == A_SECRET
        assert (await forge.b.client.get("/permission")).json() == []
        assert len(forge.live.fake.requests) == 2 + turns  # A's turn, then B's


async def test_an_outside_path_asks_only_its_own_tenant(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    elsewhere = tmp_path / "shared-docs"
    elsewhere.mkdir()
    async with two_tenants(tmp_path, fake_openai, database_url, b_may_reach=elsewhere) as forge:
        (elsewhere / "readme.txt").write_text("public notes\n")
        sid = (await forge.b.client.post("/session")).json()["id"]
        b_events = EventCollector()
        await b_events.start(forge.live.client, "/event", **forge.b.headers)
        forge.live.fake.enqueue(call("read", {"filePath": str(elsewhere / "readme.txt")}), reply("read it"))
        turn = asyncio.create_task(forge.b.client.post(f"/session/{sid}/message", json=text_body("read")))
        asked = await b_events.wait_for(lambda f: f.type == "permission.asked")
        request_id = asked.properties["id"]
        assert asked.properties["permission"] == "external_directory"
        assert asked.properties["patterns"] == [f"{elsewhere}/*"]  # pytest's tmp_path is already resolved
        assert [p["id"] for p in (await forge.b.client.get("/permission")).json()] == [request_id]
        # A neither sees nor answers B's request: to A it is an id like any unknown one.
        assert (await forge.a.client.get("/permission")).json() == []
        foreign = await forge.a.client.post(f"/permission/{request_id}/reply", json={"reply": "once"})
        unknown_id = made_up_id("permission")
        missing = await forge.a.client.post(f"/permission/{unknown_id}/reply", json={"reply": "once"})
        assert foreign.status_code == 404
        assert foreign.content.replace(request_id.encode(), unknown_id.encode()) == missing.content

        replied = await forge.b.client.post(f"/permission/{request_id}/reply", json={"reply": "once"})
        assert replied.status_code == 200, replied.text
        assert (await turn).status_code == 200
        await b_events.stop()
        history = (await forge.b.client.get(f"/session/{sid}/message")).json()
        [read] = _tool_parts(history)
        assert read["state"]["status"] == "completed"
        assert "public notes" in read["state"]["output"]


async def test_a_message_id_taken_elsewhere_is_refused_the_same_whoever_holds_it(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async def user_message_id(client: httpx2.AsyncClient, sid: str) -> str:
        messages = (await client.get(f"/session/{sid}/message")).json()
        return str(next(m["info"]["id"] for m in messages if m["info"]["role"] == "user"))

    async with two_tenants(tmp_path, fake_openai, database_url) as forge:
        a_sid = (await forge.a.client.post("/session")).json()["id"]
        b_first = (await forge.b.client.post("/session")).json()["id"]
        b_second = (await forge.b.client.post("/session")).json()["id"]
        forge.live.fake.enqueue(reply("for A"), reply("for B"))
        assert (
            await forge.a.client.post(f"/session/{a_sid}/message", json=text_body("a"))
        ).status_code == 200
        assert (
            await forge.b.client.post(f"/session/{b_first}/message", json=text_body("b"))
        ).status_code == 200
        a_id = await user_message_id(forge.a.client, a_sid)
        b_id = await user_message_id(forge.b.client, b_first)
        a_before = (await forge.a.client.get(f"/session/{a_sid}/message")).content

        answers = {}
        for taken in (a_id, b_id):
            body = {**text_body("reuse"), "messageID": taken}
            answers[taken] = await forge.b.client.post(f"/session/{b_second}/message", json=body)

        assert answers[a_id].status_code == answers[b_id].status_code == 400
        assert answers[a_id].content.replace(a_id.encode(), b_id.encode()) == answers[b_id].content
        assert "cannot be used" in answers[a_id].json()["data"]["message"]
        assert (await forge.a.client.get(f"/session/{a_sid}/message")).content == a_before
        assert (await forge.b.client.get(f"/session/{b_second}/message")).json() == []
        assert len(forge.live.fake.requests) == 2  # no turn ran for a refused prompt
