"""`agentforge serve`: refuses public addresses unless authentication is on; serves on loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from dataclasses import dataclass

import pytest

from agentforge.cli.serve import _listen, is_loopback
from agentforge.client import AgentForgeError, AsyncAgentForge
from agentforge.store.migrate import HEAD_REVISION
from tests.cli.conftest import Cli
from tests.fakes.openai_server import FakeOpenAI, reply


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
async def test_serve_refuses_a_non_loopback_host(cli: Cli, host: str) -> None:
    result = await cli.invoke("serve", "--host", host, *cli.local)
    assert result.exit_code == 2
    assert f"refusing to bind {host} without authentication configured" in result.stderr


@pytest.mark.parametrize("command", [["serve"], ["run", "hello"]])
async def test_a_database_url_of_no_supported_kind_is_one_line_and_exit_2(
    cli: Cli, command: list[str]
) -> None:
    result = await cli.invoke(*command, *cli.local, "--db", "mysql://root@localhost/forge")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: database URL: Unsupported database URL scheme 'mysql': use sqlite:///<path> or postgresql://…"
    ]
    assert not (cli.data_dir / "agentforge.db").exists()  # nothing created


async def test_serve_refuses_a_public_host_from_the_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTFORGE_HOST", "0.0.0.0")
    result = await cli.invoke("serve", *cli.local)
    assert result.exit_code == 2
    assert "refusing to bind 0.0.0.0" in result.stderr


def test_loopback_addresses() -> None:
    loopback = ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"]
    assert all(is_loopback(host) for host in loopback)


async def test_serve_prints_its_url_and_answers(cli: Cli) -> None:
    process, line = await cli.serve()
    try:
        assert line.startswith("Agent Forge listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        async with AsyncAgentForge(url) as client:
            assert (await client.health())["healthy"] is True
            session = await client.create_session(title="served")
            assert (await client.get_session(session.id)).title == "served"
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
    assert (cli.data_dir / "agentforge.db").exists()


async def test_serve_binds_a_public_address_with_authentication_on(cli: Cli) -> None:
    config = json.loads(cli.config.read_text())
    cli.config.write_text(json.dumps({**config, "auth": {"api_keys": True}}))
    process, line = await cli.serve("--host", "0.0.0.0")
    try:
        assert line.startswith("Agent Forge listening on http://0.0.0.0:"), line
        url = "http://127.0.0.1:" + line.strip().rsplit(":", 1)[1]
        async with AsyncAgentForge(url) as client:
            assert (await client.health())["healthy"] is True
            with pytest.raises(AgentForgeError) as refused:
                await client.list_sessions()
            assert refused.value.status == 401
            assert refused.value.message.startswith("missing bearer token")
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)


async def test_serve_names_the_settings_that_allow_a_public_bind(cli: Cli) -> None:
    result = await cli.invoke("serve", "--host", "0.0.0.0", *cli.local)
    assert result.exit_code == 2
    assert "auth.jwt, auth.gateway, auth.required or auth.api_keys" in result.stderr


async def test_serve_refuses_a_broken_auth_config(cli: Cli) -> None:
    config = json.loads(cli.config.read_text())
    jwt = {
        "issuer": "https://issuer.test",
        "audience": "forge",
        "algorithms": ["RS256"],
        "public_key": "nope",
    }
    cli.config.write_text(json.dumps({**config, "auth": {"jwt": jwt}}))
    result = await cli.invoke("serve", *cli.local)
    assert result.exit_code == 2
    assert "auth.jwt.public_key is not an RSA public key in PEM form" in result.stderr


async def test_a_second_server_on_the_same_data_directory_is_one_line_and_exit_1(cli: Cli) -> None:
    process, _line = await cli.serve()
    try:
        result = await cli.invoke("serve", "--port", "0", *cli.local)
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 30)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "another Agent Forge server is already running" in lines[0], lines
    assert "--data-dir" in lines[0]


async def test_a_port_in_use_is_one_line_and_exit_1(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = await cli.invoke("serve", "--port", str(port), *cli.local)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
        " (another server is using it: stop it or pick another --port)"
    ]
    assert not cli.data_dir.exists()  # refused before anything was created


async def test_connections_accepted_on_the_listener_have_nagle_off() -> None:
    """uvicorn serves the listener through asyncio, which sets TCP_NODELAY only on sockets whose
    proto is TCP: otherwise a response written in pieces waits for the client's delayed ACK."""
    listener = _listen("127.0.0.1", 0)
    accepted: asyncio.Future[socket.socket] = asyncio.get_running_loop().create_future()

    def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer.get_extra_info("socket"))

    server = await asyncio.start_server(on_connect, sock=listener)
    try:
        _reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        served = await asyncio.wait_for(accepted, 10)
        assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()
        await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()


# What only a Postgres database needs: SQLAlchemy's asyncio layer and the ORM it imports, the
# postgresql dialect, the driver (store/engine.py and store/conflicts.py load them on that path). And
# what only preparing a database needs, which a first start does in a child process
# (runtime/preparation.py): Alembic to migrate, the signing library for the audit checkpoint.
POSTGRES_ONLY = ("sqlalchemy.ext.asyncio", "sqlalchemy.orm", "sqlalchemy.dialects.postgresql", "asyncpg")
PREPARING_ONLY = ("alembic", "cryptography")


async def test_a_sqlite_server_first_started_or_restarted_loads_neither_postgres_nor_preparing_libraries(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    # A first start: the child migrates the new database and signs the first checkpoint; the server
    # finds both done.
    first = await _served_imports(cli, fake_openai, turn=True)
    created = f"Database created at schema {HEAD_REVISION}"
    assert first.prepared == [created, "Audit checkpoint of 1 chain(s) written"]
    assert first.reported >= {"sqlalchemy.sql", "agentforge.store.projector"}  # a report was read
    assert _within(first.server_imported, (*POSTGRES_ONLY, *PREPARING_ONLY)) == []
    # A restart after audited writes: the child signs their heads.
    again = await _served_imports(cli, fake_openai, turn=False)
    assert again.prepared == ["Audit checkpoint of 2 chain(s) written"]
    assert _within(again.server_imported, (*POSTGRES_ONLY, *PREPARING_ONLY)) == []
    # Nothing audited since: no child, and the whole report is the server's.
    third = await _served_imports(cli, fake_openai, turn=True)
    assert third.prepared == []
    assert _within(third.reported, (*POSTGRES_ONLY, *PREPARING_ONLY)) == []


@dataclass
class _Imports:
    prepared: list[str]  # what the child process logged it did (none: there was no child)
    server_imported: set[str]  # the modules the server imported once the child was done
    reported: set[str]  # every module the report names


async def _served_imports(cli: Cli, fake_openai: FakeOpenAI, *, turn: bool) -> _Imports:
    """Serve with `-X importtime` until its checkpoint task has looked (and with `turn`, through a
    first write and a turn), then stop it."""
    # -X importtime's report on stderr names every module the process imported, when it did. A child
    # process's report comes before the server logs what the child did.
    process, line = await cli.serve("--log-level", "debug", python=("-X", "importtime"), drain_stderr=True)
    assert cli.stderr is not None
    await cli.stderr.wait_for("Audit checkpoint not needed")
    try:
        if turn:
            fake_openai.enqueue(reply("served"))
            async with AsyncAgentForge(line.split()[-1]) as client:
                session = await client.create_session(title="first write")
                answer = await client.prompt(session.id, "first turn")
                assert [part.text for part in answer.parts if part.type == "text"] == ["served"]
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
    lines = await cli.stderr.rest()
    logged = [n for n, text in enumerate(lines) if "[agentforge.runtime.preparation]" in text]
    prepared = [lines[n].split("] ", 1)[1].rsplit(" [agentforge", 1)[0].strip() for n in logged]
    server_lines = lines[logged[-1] + 1 :] if logged else lines
    return _Imports(prepared, _modules(server_lines), _modules(lines))


def _modules(report: list[str]) -> set[str]:
    return {row.rsplit("|", 1)[1].strip() for row in report if row.startswith("import time:")}


def _within(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))
