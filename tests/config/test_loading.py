"""Config discovery, merge, substitution and errors; settings precedence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import (
    Config,
    ConfigError,
    config_files,
    deep_merge,
    load_config,
    load_settings,
    read_overlay_file,
    tenant_config,
)


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """An isolated home, user config/data dirs and workspace; no AGENTFORGE_* variables."""
    home, config_home, data_home, workspace = (
        tmp_path / name for name in ("home", "xdg-config", "xdg-data", "ws")
    )
    for path in (home, config_home / "agentforge", data_home, workspace):
        path.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    for name in ("CONFIG", "DATA_DIR", "DATABASE_URL", "DATABASE_OWNER_URL", "HOST", "PORT"):
        monkeypatch.delenv(f"AGENTFORGE_{name}", raising=False)
    monkeypatch.chdir(workspace)
    return {
        "home": home,
        "user": config_home / "agentforge" / "agentforge.json",
        "data": data_home / "agentforge",
        "workspace": workspace,
        "tmp": tmp_path,
    }


def write(path: Path, content: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_no_files_gives_defaults(dirs: dict[str, Path]) -> None:
    config, sources = load_config()
    assert sources == []
    assert config.model is None
    assert config.provider == {}
    assert (config.tool_output.max_lines, config.tool_output.max_bytes) == (2000, 51200)
    assert config.retry.max_attempts == 5
    assert (config.server.host, config.server.port) == ("127.0.0.1", 4096)


def test_discovery_and_merge_order(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    user = write(
        dirs["user"], {"model": "a/user", "small_model": "a/small", "server": {"port": 1}, "tags": [1, 2]}
    )
    project = write(
        dirs["workspace"] / "agentforge.json", {"model": "a/project", "server": {"host": "0.0.0.0"}}
    )
    from_env = write(dirs["tmp"] / "env.json", {"model": "a/env", "tags": [3]})
    explicit = write(dirs["tmp"] / "explicit.json", {"model": "a/explicit"})

    assert config_files() == [user, project]
    config, _ = load_config()
    assert (config.model, config.small_model) == ("a/project", "a/small")
    assert (config.server.host, config.server.port) == ("0.0.0.0", 1)  # objects merge key by key

    monkeypatch.setenv("AGENTFORGE_CONFIG", str(from_env))
    assert config_files() == [user, project, from_env]
    config, _ = load_config()
    assert config.model == "a/env"
    assert config.model_extra == {"tags": [3]}  # lists are replaced, not concatenated

    config, sources = load_config(config_path=explicit)
    assert sources == [user, project, from_env, explicit]
    assert config.model == "a/explicit"


def test_project_file_comes_from_the_given_directory(dirs: dict[str, Path]) -> None:
    other = dirs["tmp"] / "other"
    write(other / "agentforge.json", {"model": "x/other"})
    config, _ = load_config(directory=other)
    assert config.model == "x/other"


def test_named_files_must_exist(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    missing = dirs["tmp"] / "nope.json"
    with pytest.raises(ConfigError, match=r"nope\.json: config file not found"):
        load_config(config_path=missing)
    monkeypatch.setenv("AGENTFORGE_CONFIG", str(missing))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config()


def test_unknown_keys_are_kept(dirs: dict[str, Path]) -> None:
    write(dirs["user"], {"permission": {"bash": "ask"}, "agent": {"build": {"model": "a/b"}}})
    config, _ = load_config()
    assert config.model_extra == {"permission": {"bash": "ask"}, "agent": {"build": {"model": "a/b"}}}
    assert config.model_dump()["permission"] == {"bash": "ask"}


def test_provider_shape_uses_wire_keys(dirs: dict[str, Path]) -> None:
    write(
        dirs["workspace"] / "agentforge.json",
        {
            "provider": {
                "local": {
                    "api": "openai",
                    "options": {"baseURL": "http://localhost:11434/v1", "apiKey": "k", "timeout": 12.5},
                    "models": {
                        "qwen": {"limit": {"context": 32768, "output": 4096}, "cost": {"cache_read": 0.1}}
                    },
                }
            }
        },
    )
    config, _ = load_config()
    local = config.provider["local"]
    assert (local.options.base_url, local.options.api_key, local.options.timeout) == (
        "http://localhost:11434/v1",
        "k",
        12.5,
    )
    qwen = local.models["qwen"]
    assert qwen.limit is not None and (qwen.limit.context, qwen.limit.output) == (32768, 4096)
    assert qwen.cost is not None and qwen.cost.cache_read == 0.1
    assert config.model_dump(exclude_none=True)["provider"]["local"]["options"]["baseURL"] == (
        "http://localhost:11434/v1"
    )


def test_env_substitution(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-from-env")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    write(
        dirs["user"],
        {
            "provider": {
                "p": {
                    "options": {"apiKey": "{env:LOCAL_KEY}", "baseURL": "http://{env:NOT_SET_ANYWHERE}h/v1"}
                }
            },
            "notes": ["key={env:LOCAL_KEY}"],
            "{env:LOCAL_KEY}": "keys are not substituted",
        },
    )
    config, _ = load_config()
    options = config.provider["p"].options
    assert options.api_key == "sk-from-env"
    assert options.base_url == "http://h/v1"  # a missing variable becomes ""
    assert config.model_extra is not None
    assert config.model_extra["notes"] == ["key=sk-from-env"]
    assert "{env:LOCAL_KEY}" in config.model_extra


def test_file_substitution(dirs: dict[str, Path]) -> None:
    config_dir = dirs["tmp"] / "conf"
    write(config_dir / "secrets" / "key.txt", "  sk-from-file\n")
    write(dirs["home"] / "prompt.txt", "Be brief.\n")
    path = write(
        config_dir / "agentforge.json",
        {
            "provider": {"p": {"options": {"apiKey": "{file:secrets/key.txt}"}}},
            "prompt": "{file:~/prompt.txt}",
        },
    )
    config, _ = load_config(config_path=path)
    assert config.provider["p"].options.api_key == "sk-from-file"  # relative to the config file, stripped
    assert config.model_extra == {"prompt": "Be brief."}


def test_missing_substituted_file_is_an_error(dirs: dict[str, Path]) -> None:
    path = write(dirs["user"], {"provider": {"p": {"options": {"apiKey": "{file:missing.key}"}}}})
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.path == path
    assert "{file:missing.key}" in str(caught.value)
    assert str(path) in str(caught.value)


def test_bad_json_names_the_file_and_position(dirs: dict[str, Path]) -> None:
    path = write(dirs["workspace"] / "agentforge.json", '{\n  "model": "a/b",\n  oops\n}')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: invalid JSON at line 3")


def test_top_level_must_be_an_object(dirs: dict[str, Path]) -> None:
    write(dirs["user"], "[1, 2]")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_config()


def test_schema_violation_names_the_file_and_field(dirs: dict[str, Path]) -> None:
    write(dirs["user"], {"model": "a/b"})
    bad = write(
        dirs["workspace"] / "agentforge.json",
        {"provider": {"p": {"models": {"m": {"limit": {"context": "big"}}}}}},
    )
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.path == bad
    assert "provider.p.models.m.limit.context" in str(caught.value)


def test_bad_override_is_an_error(dirs: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match=r"config override: invalid config: server\.port"):
        load_config(override={"server": {"port": 70000}})


def test_deep_merge() -> None:
    base = {"a": {"x": 1, "y": {"k": 1}}, "b": [1], "c": 1}
    assert deep_merge(base, {"a": {"y": {"j": 2}}, "b": [2], "d": 4}) == {
        "a": {"x": 1, "y": {"k": 1, "j": 2}},
        "b": [2],
        "c": 1,
        "d": 4,
    }
    assert base["a"] == {"x": 1, "y": {"k": 1}}  # inputs untouched


def test_settings_defaults(dirs: dict[str, Path]) -> None:
    settings = load_settings()
    assert settings.data_dir == dirs["data"]
    assert settings.database_url == f"sqlite:///{dirs['data'] / 'agentforge.db'}"
    assert (settings.host, settings.port) == ("127.0.0.1", 4096)
    assert settings.directory == dirs["workspace"].resolve()
    assert settings.config_sources == ()


def test_settings_precedence(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    write(dirs["user"], {"server": {"host": "10.0.0.1", "port": 5000}})
    assert (load_settings().host, load_settings().port) == ("10.0.0.1", 5000)  # config beats defaults

    monkeypatch.setenv("AGENTFORGE_HOST", "0.0.0.0")
    monkeypatch.setenv("AGENTFORGE_PORT", "6000")
    monkeypatch.setenv("AGENTFORGE_DATA_DIR", str(dirs["tmp"] / "env-data"))
    monkeypatch.setenv("AGENTFORGE_DATABASE_URL", "postgresql://db/forge")
    settings = load_settings()
    assert (settings.host, settings.port) == ("0.0.0.0", 6000)  # env beats config
    assert settings.data_dir == dirs["tmp"] / "env-data"
    assert settings.database_url == "postgresql://db/forge"

    explicit = load_settings(
        host="127.0.0.2", port=0, data_dir=dirs["tmp"] / "arg-data", database_url="sqlite:///x.db"
    )
    assert (explicit.host, explicit.port) == ("127.0.0.2", 0)  # explicit beats env
    assert explicit.data_dir == dirs["tmp"] / "arg-data"
    assert explicit.database_url == "sqlite:///x.db"


def test_database_section_then_env_then_arguments(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings().database_owner_url is None
    write(
        dirs["user"],
        {"database": {"url": "postgresql://app@db/forge", "owner_url": "postgresql://own@db/forge"}},
    )
    settings = load_settings()
    assert (settings.database_url, settings.database_owner_url) == (
        "postgresql://app@db/forge",
        "postgresql://own@db/forge",
    )

    monkeypatch.setenv("AGENTFORGE_DATABASE_URL", "postgresql://app@env/forge")
    monkeypatch.setenv("AGENTFORGE_DATABASE_OWNER_URL", "postgresql://own@env/forge")
    settings = load_settings()
    assert (settings.database_url, settings.database_owner_url) == (
        "postgresql://app@env/forge",
        "postgresql://own@env/forge",
    )

    explicit = load_settings(database_url="postgresql://a@x/f", database_owner_url="postgresql://o@x/f")
    assert (explicit.database_url, explicit.database_owner_url) == (
        "postgresql://a@x/f",
        "postgresql://o@x/f",
    )


def test_database_url_follows_the_data_dir(dirs: dict[str, Path]) -> None:
    settings = load_settings(data_dir=dirs["tmp"] / "d")
    assert settings.database_url == f"sqlite:///{dirs['tmp'] / 'd' / 'agentforge.db'}"


def test_bad_port_variable(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFORGE_PORT", "http")
    with pytest.raises(ConfigError, match="AGENTFORGE_PORT must be a port number"):
        load_settings()


def test_config_override_is_merged_last(dirs: dict[str, Path]) -> None:
    write(dirs["workspace"] / "agentforge.json", {"model": "file/model", "retry": {"max_attempts": 3}})
    override = {
        "model": "fake/test-model",
        "provider": {"fake": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}},
    }
    settings = load_settings(config_override=override)
    assert settings.config.model == "fake/test-model"
    assert settings.config.retry.max_attempts == 3
    assert settings.config.provider["fake"].options.base_url == "http://127.0.0.1:1/v1"
    assert settings.config_sources == (dirs["workspace"] / "agentforge.json",)


# --- tenancy -------------------------------------------------------------------------------------


def test_a_tenant_config_is_the_base_with_its_overlays_deep_merged_in_order() -> None:
    base = Config.model_validate(
        {
            "model": "a/base",
            "provider": {"a": {"options": {"baseURL": "http://a", "timeout": 5}}},
            "tenancy": {"overlays": {"acme": {"model": "a/acme"}}},
        }
    )
    merged = tenant_config(
        base,
        ({"model": "a/acme", "provider": {"a": {"options": {"timeout": 9}}}}, "tenancy.overlays.acme"),
        ({"model": "a/file"}, "acme.json"),
    )
    assert merged.model == "a/file"
    assert merged.provider["a"].options.base_url == "http://a"
    assert merged.provider["a"].options.timeout == 9
    assert merged.tenancy.overlays == {}  # other tenants' overlays never reach a tenant's config
    assert base.model == "a/base"


def test_a_tenant_overlay_that_breaks_the_schema_names_its_source() -> None:
    with pytest.raises(ConfigError, match=r"acme.json: invalid config: retry.max_attempts"):
        tenant_config(Config(), ({"retry": {"max_attempts": 0}}, "acme.json"))


@pytest.mark.parametrize("key", ["server", "plugin", "tenancy", "auth", "permission_timeout"])
def test_a_tenant_overlay_may_not_set_server_wide_keys(key: str) -> None:
    with pytest.raises(ConfigError, match=f"tenancy.overlays: acme: {key} cannot be set per tenant"):
        load_config(override={"tenancy": {"overlays": {"acme": {key: {}}}}}, env={})
    with pytest.raises(ConfigError, match=f"acme.json: {key} cannot be set per tenant"):
        tenant_config(Config(), ({key: {}}, "acme.json"))


def test_a_tenant_overlay_may_set_shell_env_but_not_whether_tools_inherit_the_environment() -> None:
    merged = tenant_config(Config(), ({"shell_env": {"REGION": "eu-1"}, "tools": {}}, "acme.json"))
    assert merged.shell_env == {"REGION": "eu-1"}
    assert merged.tools.inherit_env is True
    with pytest.raises(ConfigError, match=r"acme.json: tools.inherit_env cannot be set per tenant"):
        tenant_config(Config(), ({"tools": {"inherit_env": False}}, "acme.json"))
    with pytest.raises(ConfigError, match=r"tools.inherit_env cannot be set per tenant"):
        load_config(override={"tenancy": {"overlays": {"acme": {"tools": {"inherit_env": True}}}}}, env={})
    config, _ = load_config(override={"tools": {"inherit_env": False}}, env={})
    assert config.tools.inherit_env is False


def test_shell_env_names_must_be_environment_variable_names() -> None:
    with pytest.raises(ConfigError, match="not valid environment variable names: 1X, A-B"):
        load_config(override={"shell_env": {"OK": "1", "A-B": "2", "1X": "3"}}, env={})
    with pytest.raises(ConfigError, match="shell_env"):
        load_config(override={"shell_env": {"N": 1}}, env={})


def test_external_directories_are_absolute_per_valid_tenant() -> None:
    config, _ = load_config(override={"tenancy": {"external_directories": {"acme": ["/srv/shared"]}}}, env={})
    assert config.tenancy.external_directories_for("acme") == [Path("/srv/shared")]
    assert config.tenancy.external_directories_for("beta") == []
    with pytest.raises(ConfigError, match=r"acme: directories must be absolute paths, got \['shared'\]"):
        load_config(override={"tenancy": {"external_directories": {"acme": ["shared"]}}}, env={})
    with pytest.raises(ConfigError, match="invalid tenant id 'Acme Corp'"):
        load_config(override={"tenancy": {"external_directories": {"Acme Corp": ["/srv"]}}}, env={})


def test_the_shell_grant_names_valid_tenants_or_all_of_them() -> None:
    assert not load_config(override={}, env={})[0].tenancy.shell_granted("acme")
    listed, _ = load_config(override={"tenancy": {"shell": ["acme"]}}, env={})
    assert listed.tenancy.shell_granted("acme")
    assert not listed.tenancy.shell_granted("beta")
    everyone, _ = load_config(override={"tenancy": {"shell": "*"}}, env={})
    assert everyone.tenancy.shell_granted("beta")
    with pytest.raises(ConfigError, match="invalid tenant id 'Acme Corp'"):
        load_config(override={"tenancy": {"shell": ["Acme Corp"]}}, env={})
    with pytest.raises(ConfigError, match="shell"):
        load_config(override={"tenancy": {"shell": "acme"}}, env={})


def test_tenant_overlays_are_keyed_by_valid_tenant_ids() -> None:
    with pytest.raises(ConfigError, match="invalid tenant id 'Acme Corp'"):
        load_config(override={"tenancy": {"overlays": {"Acme Corp": {}}}}, env={})


def test_the_tenancy_section_refuses_unknown_keys_and_relative_roots() -> None:
    with pytest.raises(ConfigError, match=r"tenancy\.workspace-root"):
        load_config(override={"tenancy": {"workspace-root": "/srv"}}, env={})
    with pytest.raises(ConfigError, match="must be an absolute path"):
        load_config(override={"tenancy": {"workspace_root": "tenants/{tenant}"}}, env={})


def test_a_tenant_overlay_file_is_read_without_substitution(tmp_path: Path) -> None:
    path = tmp_path / "agentforge.json"
    assert read_overlay_file(path) is None
    path.write_text(json.dumps({"model": "a/{tenant}"}))
    assert read_overlay_file(path) == {"model": "a/{tenant}"}
    path.write_text(json.dumps({"provider": {"a": {"options": {"apiKey": "{file:/etc/hostname}"}}}}))
    with pytest.raises(ConfigError, match="not allowed in a tenant overlay file"):
        read_overlay_file(path)


def test_project_files_are_found_up_to_the_repository_root(dirs: dict[str, Path]) -> None:
    repo = dirs["tmp"] / "repo"
    (repo / ".git").mkdir(parents=True)
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    above_repo = write(dirs["tmp"] / "agentforge.json", {"model": "a/outside"})
    at_root = write(repo / "agentforge.json", {"model": "a/root", "small_model": "a/root-small"})
    nearer = write(repo / "src" / "agentforge.json", {"model": "a/src"})

    # Outermost first: the nearest file wins; nothing above the repository applies.
    assert config_files(directory=deep) == [at_root, nearer]
    config, _ = load_config(directory=deep)
    assert (config.model, config.small_model) == ("a/src", "a/root-small")
    assert above_repo not in config_files(directory=deep)


def test_outside_a_repository_only_the_directory_itself_counts(dirs: dict[str, Path]) -> None:
    loose = dirs["tmp"] / "loose" / "sub"
    loose.mkdir(parents=True)
    write(dirs["tmp"] / "loose" / "agentforge.json", {"model": "a/parent"})
    here = write(loose / "agentforge.json", {"model": "a/here"})
    assert config_files(directory=loose) == [here]
