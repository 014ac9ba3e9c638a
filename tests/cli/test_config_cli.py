"""What the CLI says about its configuration: unknown keys, ports, defaults in help, one-line errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from agentforge.cli import exits
from agentforge.cli.main import app
from tests.cli.conftest import Cli
from tests.fakes.openai_server import FakeOpenAI, reply


async def test_an_unknown_key_is_a_warning_with_a_suggestion(cli: Cli, fake_openai: FakeOpenAI) -> None:
    config = json.loads(cli.config.read_text())
    cli.config.write_text(json.dumps({**config, "permision": {"bash": "ask"}}))
    fake_openai.enqueue(reply("still works"))
    result = await cli.run_local("run", "hello")
    assert result.exit_code == exits.OK, result.output
    assert "warning: unknown config key 'permision' (did you mean 'permission'?)" in result.stderr
    assert result.stdout == "still works\n"


async def test_doctor_and_production_refuse_an_unknown_key(cli: Cli) -> None:
    config = json.loads(cli.config.read_text())
    cli.config.write_text(json.dumps({**config, "server": {"prot": 1}}))
    env = {"COLUMNS": "300"}
    doctor = await asyncio.to_thread(CliRunner().invoke, app, ["doctor", *cli.local], env=env)
    assert doctor.exit_code == 1
    assert "unknown config key 'server.prot' (did you mean 'port'?)" in doctor.stdout
    production = await asyncio.to_thread(
        CliRunner().invoke, app, ["serve", "--production", "--port", "0", *cli.local], env=env
    )
    assert production.exit_code == exits.USAGE
    assert "config keys" in production.stderr


async def test_the_project_config_is_found_from_a_subdirectory(
    cli: Cli, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cli.workspace / ".git").mkdir()
    (cli.workspace / "agentforge.json").write_text(cli.config.read_text())
    sub = cli.workspace / "src" / "pkg"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    fake_openai.enqueue(reply("found it"))
    result = await cli.invoke("run", "hello", "--data-dir", str(cli.data_dir))
    assert result.exit_code == exits.OK, result.output
    assert result.stdout == "found it\n"


async def test_ports_are_validated(cli: Cli) -> None:
    result = await cli.invoke("serve", "--port", "99999")
    assert result.exit_code == exits.USAGE
    assert "Traceback" not in result.output
    assert "--port" in result.stderr


async def test_help_keeps_its_defaults() -> None:
    result = await asyncio.to_thread(CliRunner().invoke, app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "[default: 127.0.0.1]" in result.stdout
    assert "[default: 4096]" in result.stdout
    run_help = await asyncio.to_thread(CliRunner().invoke, app, ["run", "--help"], env={"COLUMNS": "200"})
    flat = " ".join(run_help.stdout.replace("│", " ").split())  # wrapped help, boxes removed
    assert "[default: ask on a terminal, else none]" in flat
    assert "3 a permission request was refused" in flat


async def test_a_bad_api_is_a_one_line_config_error(cli: Cli) -> None:
    config = json.loads(cli.config.read_text())
    config["provider"]["fake"]["api"] = "nonsense"
    cli.config.write_text(json.dumps(config))
    result = await cli.run_local("run", "hello")
    assert result.exit_code == exits.USAGE
    [line] = result.stderr.splitlines()
    assert (
        line.startswith("error: ") and "provider.fake.api: unknown api 'nonsense'; use one of openai" in line
    )


async def test_a_provider_that_is_down_is_one_error_line(cli: Cli) -> None:
    config = json.loads(cli.config.read_text())
    config["provider"]["fake"]["options"]["baseURL"] = "http://127.0.0.1:9/v1"
    config["retry"] = {"max_attempts": 1}
    cli.config.write_text(json.dumps(config))
    result = await cli.run_local("run", "hello")
    assert result.exit_code == exits.ERROR
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("[error]")]
    assert errors == ["[error] Cannot connect to provider: All connection attempts failed (APIError)"]
