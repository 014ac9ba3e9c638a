"""`agentforge doctor` and `agentforge serve --production` against real databases: the configuration
the README documents passes; a superuser runtime role, a table without row-level security and a
tampered audit row each fail, naming what is wrong."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner, Result

from agentforge.cli.main import app
from agentforge.store import Store, parse_database_url
from agentforge.store.migrate import run_with_connection
from tests.databases import POSTGRES_URL_ENV, owner_url_for
from tests.store.builders import new_session, session_created


def _readme_config() -> dict[str, Any]:
    """The production config the README documents (its `forge.json` block)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("with `forge.json`", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    config: dict[str, Any] = json.loads(block)
    return config


def _write_config(tmp_path: Path, database: dict[str, Any], **extra: Any) -> Path:
    """The README's config, on this test's database."""
    config = {**_readme_config(), "database": database, **extra}
    path = tmp_path / "forge.json"
    path.write_text(json.dumps(config))
    return path


def _data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir(mode=0o700, exist_ok=True)
    os.chmod(data, 0o700)
    return data


async def _doctor(config: Path, data_dir: Path) -> Result:
    args = ["doctor", "--config", str(config), "--data-dir", str(data_dir)]
    # A worker thread: the command runs its own event loop for Postgres.
    env = {"COLUMNS": "200", "ANTHROPIC_API_KEY": "sk-ant-test"}
    return await asyncio.to_thread(CliRunner().invoke, app, args, env=env)


async def _migrated(database_url: str) -> None:
    """Tables at head with one audited session (what a running server leaves behind)."""
    store = await Store.open(database_url, owner_url=owner_url_for(database_url))
    try:
        await store.write(session_created(new_session()))
    finally:
        await store.close()


def _database_section(database_url: str) -> dict[str, Any]:
    owner = owner_url_for(database_url)
    return {"url": database_url, **({"owner_url": owner} if owner else {})}


def _as_owner(database_url: str, statement: str) -> None:
    owner = owner_url_for(database_url)
    assert owner is not None

    def run(conn: Any) -> None:
        conn.execute(text(statement))

    run_with_connection(parse_database_url(owner), run)


async def test_the_documented_configuration_passes(tmp_path: Path, database_url: str) -> None:
    await _migrated(database_url)
    result = await _doctor(_write_config(tmp_path, _database_section(database_url)), _data_dir(tmp_path))
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output
    assert "audit chains" in result.output and "PASS" in result.output


async def test_an_unmigrated_database_fails(tmp_path: Path) -> None:
    config = _write_config(tmp_path, {"url": f"sqlite:///{tmp_path / 'data' / 'fresh.db'}"})
    result = await _doctor(config, _data_dir(tmp_path))
    assert result.exit_code == 1
    assert "migrations at head" in result.output and "no revision" in result.output


async def test_a_superuser_runtime_role_fails(tmp_path: Path, database_url: str) -> None:
    if owner_url_for(database_url) is None:
        pytest.skip("Postgres roles; SQLite has none")
    await _migrated(database_url)
    schema = make_url(database_url).query["schema"]
    superuser = make_url(os.environ[POSTGRES_URL_ENV]).update_query_dict({"schema": schema})
    section = {
        "url": superuser.render_as_string(hide_password=False),
        "owner_url": owner_url_for(database_url),
    }
    result = await _doctor(_write_config(tmp_path, section), _data_dir(tmp_path))
    assert result.exit_code == 1, result.output
    assert "is a superuser" in result.output


async def test_a_table_without_row_level_security_fails(tmp_path: Path, database_url: str) -> None:
    if owner_url_for(database_url) is None:
        pytest.skip("Postgres row-level security")
    await _migrated(database_url)
    await asyncio.to_thread(_as_owner, database_url, "ALTER TABLE part DISABLE ROW LEVEL SECURITY")
    result = await _doctor(_write_config(tmp_path, _database_section(database_url)), _data_dir(tmp_path))
    assert result.exit_code == 1, result.output
    assert "part: not enabled" in result.output


async def test_a_tampered_audit_row_fails_naming_it(tmp_path: Path, database_url: str) -> None:
    await _migrated(database_url)
    statement = "UPDATE audit_log SET actor = 'mallory' WHERE seq = 1 AND tenant_id = 'default'"
    if owner_url_for(database_url) is None:

        def tamper(conn: Connection) -> None:
            conn.execute(text(statement))

        run_with_connection(parse_database_url(database_url), tamper)
    else:
        await asyncio.to_thread(_as_owner, database_url, statement)
    result = await _doctor(_write_config(tmp_path, _database_section(database_url)), _data_dir(tmp_path))
    assert result.exit_code == 1, result.output
    assert "tenant default: row seq 1" in result.output


async def test_serve_production_refuses_to_start_when_a_critical_check_fails(tmp_path: Path) -> None:
    # Not migrated: the documented first step (`agentforge db migrate`) was skipped.
    config = _write_config(tmp_path, {"url": f"sqlite:///{tmp_path / 'data' / 'fresh.db'}"})
    args = ["serve", "--production", "--config", str(config), "--data-dir", str(_data_dir(tmp_path))]
    env = {"COLUMNS": "200", "ANTHROPIC_API_KEY": "sk-ant-test"}
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 2
    assert "refusing to start in production mode: migrations at head failed" in result.output


async def test_serve_production_refuses_a_public_bind_without_auth_even_if_forced(tmp_path: Path) -> None:
    config = tmp_path / "agentforge.json"
    config.write_text(json.dumps({"server": {"host": "0.0.0.0"}}))
    args = ["serve", "--production", "--config", str(config), "--data-dir", str(_data_dir(tmp_path))]
    result = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert result.exit_code == 2
    assert "without authentication configured" in result.output


async def test_without_the_owner_url_the_audit_chains_cannot_be_vouched_for(
    tmp_path: Path, database_url: str
) -> None:
    if owner_url_for(database_url) is None:
        pytest.skip("Postgres roles")
    await _migrated(database_url)
    result = await _doctor(_write_config(tmp_path, {"url": database_url}), _data_dir(tmp_path))
    assert result.exit_code == 1, result.output
    assert "cannot see every tenant's chain as this role" in result.output


def _broken_bwrap(tmp_path: Path) -> str:
    """A bwrap that cannot create namespaces, as on a kernel without user namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize("sandbox", ["broken", "off"])
async def test_serve_production_refuses_shell_grants_without_a_working_sandbox(
    tmp_path: Path, database_url: str, sandbox: str
) -> None:
    await _migrated(database_url)
    section = {"mode": "off"} if sandbox == "off" else {"bwrap": _broken_bwrap(tmp_path)}
    tenancy = {**_readme_config()["tenancy"], "shell": ["acme"]}
    config = _write_config(tmp_path, _database_section(database_url), tenancy=tenancy, sandbox=section)
    args = ["serve", "--production", "--config", str(config), "--data-dir", str(_data_dir(tmp_path))]
    env = {"COLUMNS": "200", "ANTHROPIC_API_KEY": "sk-ant-test"}
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 2, result.output
    assert "refusing to start in production mode: command sandbox failed" in result.output
    assert "tenancy.shell grants commands to acme" in result.output

    # Without the grant the same server starts (doctor passes the sandbox check with a warning).
    plain = _write_config(tmp_path, _database_section(database_url), sandbox=section)
    checked = await _doctor(plain, _data_dir(tmp_path))
    assert "command sandbox" in checked.output and "WARN" in checked.output
    assert "command sandbox failed" not in checked.output


async def test_doctor_compares_the_chains_with_their_signed_checkpoints(
    tmp_path: Path, database_url: str
) -> None:
    await _migrated(database_url)
    config = _write_config(tmp_path, _database_section(database_url))
    data_dir = _data_dir(tmp_path)
    args = ["audit", "checkpoint", "--config", str(config), "--data-dir", str(data_dir)]
    taken = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert taken.exit_code == 0, taken.output
    passing = await _doctor(config, data_dir)
    assert passing.exit_code == 0, passing.output
    assert "audit checkpoints" in passing.output and "1 signed, the latest from" in passing.output

    statement = "DELETE FROM audit_log WHERE tenant_id = 'default'"
    if owner_url_for(database_url) is None:

        def delete(conn: Connection) -> None:
            conn.execute(text(statement))

        run_with_connection(parse_database_url(database_url), delete)
    else:
        await asyncio.to_thread(_as_owner, database_url, statement)
    failing = await _doctor(config, data_dir)
    assert failing.exit_code == 1, failing.output
    assert "tenant default: seq 1 rows deleted from the end" in failing.output
