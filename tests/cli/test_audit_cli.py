"""`agentforge audit verify`: one line per tenant, exit 1 naming the first broken row."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentforge.cli.main import app
from agentforge.store import Store, sqlite_url
from tests.store.audit_helpers import audit_rows, owner_url, recompute, run_sql


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


# --- checkpoints: the chains' heads, signed and kept outside the database --------------------------------


async def audit(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, ["audit", *args])


async def checkpointed(database_url: str, tmp_path: Path) -> tuple[list[str], Path]:
    """Two chains and a checkpoint of them (the key made in the data directory)."""
    written = await two_chains(database_url)
    out = tmp_path / "export" / "checkpoints.jsonl"
    taken = await audit("checkpoint", "--db", owner_url(database_url), "--out", str(out), *data(tmp_path))
    assert taken.exit_code == 0, taken.output
    assert taken.stdout == f"checkpoint written to {out}: acme at seq 1, default at seq 3\n"
    return written, out


def data(tmp_path: Path) -> list[str]:
    return ["--data-dir", str(tmp_path / "data")]


async def verify_with(database_url: str, tmp_path: Path, checkpoints: Path, *extra: str) -> Result:
    args = ["--db", owner_url(database_url), "--checkpoints", str(checkpoints), *data(tmp_path), *extra]
    return await audit("verify", *args)


async def test_chains_that_match_their_checkpoints_exit_0(database_url: str, tmp_path: Path) -> None:
    _, out = await checkpointed(database_url, tmp_path)
    result = await verify_with(database_url, tmp_path, out)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "ok      tenant acme: 1 entries (matches 1 checkpointed head(s))",
        "ok      tenant default: 3 entries (matches 1 checkpointed head(s))",
    ]
    # Private: the export, the key and their directories are the server user's alone.
    key = tmp_path / "data" / "audit" / "checkpoint-key.pem"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700


async def test_a_deleted_tail_is_detected(database_url: str, tmp_path: Path) -> None:
    _, out = await checkpointed(database_url, tmp_path)
    await run_sql(database_url, "DELETE FROM audit_log WHERE tenant_id = 'default' AND seq = 3")
    await run_sql(database_url, "DELETE FROM audit_log WHERE tenant_id = 'acme'")

    alone = await audit("verify", "--db", owner_url(database_url))
    assert alone.exit_code == 0, alone.output  # what the chain alone cannot show

    result = await verify_with(database_url, tmp_path, out)
    assert result.exit_code == 1, result.output
    acme, default = result.stdout.splitlines()
    assert acme.startswith("BROKEN  tenant acme: seq 1: rows deleted from the end: the chain ends at seq 0")
    assert default.startswith(
        "BROKEN  tenant default: seq 3: rows deleted from the end: the chain ends at seq 2, "
        "but the checkpoint of "
    )
    assert default.endswith("saw seq 3 (2 entries intact before it)")


async def test_a_rehashed_chain_is_detected(database_url: str, tmp_path: Path) -> None:
    written, out = await checkpointed(database_url, tmp_path)
    await run_sql(
        database_url, "UPDATE audit_log SET actor = 'mallory' WHERE tenant_id = 'default' AND seq = 2"
    )
    # The owner recomputes every hash after the edit: the chain is consistent again.
    rows = await audit_rows(database_url, "default")
    hashes = recompute(rows)
    rechain = (
        "UPDATE audit_log SET prev_hash = :prev, row_hash = :new WHERE tenant_id = 'default' AND seq = :seq"
    )
    for row, prev, new in zip(rows, ["0" * 64, *hashes], hashes, strict=False):
        await run_sql(database_url, rechain, prev=prev, new=new, seq=row["seq"])
    alone = await audit("verify", "--db", owner_url(database_url))
    assert alone.exit_code == 0, alone.output  # what the chain alone cannot show

    result = await verify_with(database_url, tmp_path, out)
    assert result.exit_code == 1, result.output
    acme, default = result.stdout.splitlines()
    assert acme.startswith("ok      tenant acme")
    assert default.startswith(f"BROKEN  tenant default: seq 3 (id {written[2]}): rewritten: row_hash differs")
    assert "re-hashed" in default


async def test_a_forged_or_foreign_checkpoint_is_refused(database_url: str, tmp_path: Path) -> None:
    _, out = await checkpointed(database_url, tmp_path)
    line = json.loads(out.read_text())
    line["heads"]["default"]["seq"] = 2  # what a forger would need after deleting the tail
    forged = tmp_path / "forged.jsonl"
    forged.write_text(json.dumps(line) + "\n")
    result = await verify_with(database_url, tmp_path, forged)
    assert result.exit_code == 1
    assert "checkpoint 1: the signature does not match its contents" in result.stderr

    # Checked with another key (another server's, say): refused, not trusted.
    other = await audit("public-key", "--data-dir", str(tmp_path / "other"))
    assert other.exit_code == 1 and "cannot read the checkpoint key" in other.stderr
    await audit("checkpoint", "--db", owner_url(database_url), "--data-dir", str(tmp_path / "other"))
    foreign = await audit("public-key", "--data-dir", str(tmp_path / "other"))
    foreign_key = tmp_path / "foreign.pem"
    foreign_key.write_text(foreign.stdout)
    refused = await verify_with(database_url, tmp_path, out, "--public-key", str(foreign_key))
    assert refused.exit_code == 1
    assert "checkpoint 1: signed by ed25519:" in refused.stderr

    # The right public key alone (no private key at hand) verifies them.
    ours = await audit("public-key", *data(tmp_path))
    assert ours.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    public = tmp_path / "ours.pem"
    public.write_text(ours.stdout)
    verified = await verify_with(database_url, tmp_path, out, "--public-key", str(public))
    assert verified.exit_code == 0, verified.output
