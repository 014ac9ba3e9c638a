"""`/global/ready`: 200 while the database answers at the migrations' head; 503 naming what failed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentforge.store.migrate import head_revision
from tests.databases import POSTGRES_URL_ENV
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.openai_server import FakeOpenAI


class TcpProxy:
    """Forwards a loopback port to the database; `cut()` drops every connection and stops listening,
    `restore()` listens again: the database becomes unreachable and comes back, as on a network fault."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def restore(self) -> None:
        await self.start()


async def _ready(live: LiveServer) -> httpx2.Response:
    return await live.client.get("/global/ready")


async def test_ready_when_the_database_answers_at_head(live: LiveServer) -> None:
    response = await _ready(live)
    assert response.status_code == 200, response.text
    assert response.json()["ready"] is True


async def test_not_ready_when_the_schema_is_behind_the_code(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with start_live_server(tmp_path, fake_openai) as live:
        # Another process (an operator rolling back) moved the schema under the running server.
        engine = create_engine(f"sqlite:///{tmp_path / 'forge.db'}")
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0005_identity_audit'"))
        engine.dispose()
        response = await _ready(live)
        assert response.status_code == 503
        failed = response.json()["failed"]
        assert set(failed) == {"migrations"}
        assert f"expects {head_revision()}" in failed["migrations"]


@contextlib.asynccontextmanager
async def _proxied(database_url: str) -> AsyncIterator[tuple[TcpProxy, str]]:
    url = make_url(database_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.start()
    try:
        yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
    finally:
        with contextlib.suppress(Exception):
            await proxy.cut()


async def test_not_ready_while_the_database_is_unreachable(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip(f"a network fault needs a database server ({POSTGRES_URL_ENV})")
    async with (
        _proxied(database_url) as (proxy, proxied_url),
        start_live_server(tmp_path, fake_openai, database_url=proxied_url) as live,
    ):
        assert (await _ready(live)).status_code == 200
        await proxy.cut()
        response = await _ready(live)
        assert response.status_code == 503
        failed = response.json()["failed"]
        assert "database" in failed and failed["database"].startswith("unreachable")
        # Liveness is not readiness: the process itself is fine.
        assert (await live.client.get("/global/health")).status_code == 200
        await proxy.restore()
        deadline = asyncio.get_running_loop().time() + 15
        while (response := await _ready(live)).status_code != 200:
            assert asyncio.get_running_loop().time() < deadline, response.text
            await asyncio.sleep(0.1)
