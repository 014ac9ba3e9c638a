"""`agentforge audit verify`: one line per tenant, exit 1 naming the first broken row."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentforge.cli.main import app
from agentforge.store import Store, sqlite_url
from tests.store.audit_helpers import owner_url, run_sql


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AGENTFORGE_CONFIG", "AGENTFORGE_DATA_DIR", "AGENTFORGE_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)


async def invoke(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, ["audit", "verify", *args])


async def two_chains(database_url: str) -> list[str]:
    store = await Store.open(database_url)
    try:
        written = [
            (await store.record_audit("default", "test", actor="alice", data={"i": i})).id for i in range(3)
        ]
        await store.record_audit("acme", "test", actor="bob", data={})
    finally:
        await store.close()
    return written


async def test_intact_chains_exit_0(database_url: str) -> None:
    await two_chains(database_url)
    result = await invoke("--db", owner_url(database_url))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "ok      tenant acme: 1 entries",
        "ok      tenant default: 3 entries",
    ]
    one = await invoke("--db", owner_url(database_url), "--tenant", "default")
    assert (one.exit_code, one.stdout) == (0, "ok      tenant default: 3 entries\n")


async def test_an_edited_row_exits_1_and_is_named(database_url: str) -> None:
    written = await two_chains(database_url)
    await run_sql(
        database_url, "UPDATE audit_log SET actor = 'mallory' WHERE tenant_id = 'default' AND seq = 2"
    )
    result = await invoke("--db", owner_url(database_url))
    assert result.exit_code == 1, result.output
    acme, default = result.stdout.splitlines()
    assert acme == "ok      tenant acme: 1 entries"
    assert default.startswith(f"BROKEN  tenant default: seq 2 (id {written[1]}): hash mismatch")
    assert default.endswith("(1 entries intact before it)")


async def test_default_database_comes_from_the_settings(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await two_chains(sqlite_url(data_dir))
    await run_sql(sqlite_url(data_dir), "DELETE FROM audit_log WHERE tenant_id = 'default' AND seq = 1")
    result = await invoke("--data-dir", str(data_dir))
    assert result.exit_code == 1, result.output
    assert "seq 2" in result.stdout and "gap in seq: expected seq 1, found seq 2" in result.stdout


async def test_an_empty_log_and_a_missing_database(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "empty")
    await (await Store.open(url)).close()
    empty = await invoke("--db", url)
    assert (empty.exit_code, empty.stdout) == (0, "no audit entries\n")
    missing = await invoke("--db", sqlite_url(tmp_path / "nowhere"))
    assert missing.exit_code == 1
    assert "no database at" in missing.stderr
    bad = await invoke("--db", "mysql://x/y")
    assert bad.exit_code == 1 and "Unsupported database URL" in bad.stderr


async def test_without_db_the_configured_owner_sees_every_tenant(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = owner_url(database_url)
    if owner == database_url:
        pytest.skip("Postgres roles: on SQLite one URL sees every tenant")
    await two_chains(database_url)
    monkeypatch.setenv("AGENTFORGE_DATABASE_URL", database_url)
    monkeypatch.setenv("AGENTFORGE_DATABASE_OWNER_URL", owner)
    result = await invoke()
    assert result.exit_code == 0, result.output
    assert "acme" in result.output and "default" in result.output
    # One tenant's chain needs no owner: the runtime role reads it under that tenant's setting.
    monkeypatch.delenv("AGENTFORGE_DATABASE_OWNER_URL")
    # Every chain does: as the runtime role, row-level security would hide them all, so it refuses
    # rather than report "no audit entries".
    hidden = await invoke()
    assert hidden.exit_code == 1
    assert "cannot see every tenant's chain" in hidden.output
    single = await invoke("--tenant", "acme")
    assert single.exit_code == 0, single.output
    assert "acme" in single.output and "default" not in single.output
