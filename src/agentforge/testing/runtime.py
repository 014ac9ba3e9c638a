"""A runtime that talks to a scripted model only, for tests that drive sessions in-process.

    model = ScriptedModel().reply("hi")
    async with scripted_runtime(workspace, data_dir, model) as rt:
        sessions = SessionService(rt.sessions, "default")
        session = await sessions.create(SessionCreateInput())
        reply = await SessionPrompt(sessions).prompt(session.id, PromptInput.model_validate(
            {"parts": [{"type": "text", "text": "hello"}]}))

The settings name one provider, `scripted`, with one model, `model` (SCRIPTED_MODEL), and no
automatic titles (a title would take a scripted response out of turn); `config` adds to or overrides
them. The store is SQLite in `data_dir` unless `database_url` says otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import Settings, deep_merge, load_settings
from agentforge.runtime.runtime import Runtime
from agentforge.session.processor import StreamFn

SCRIPTED_PROVIDER = "scripted"
SCRIPTED_MODEL = "model"


def scripted_config(**overrides: Any) -> dict[str, Any]:
    """A config whose only model is the scripted one (its URL is never called)."""
    base: dict[str, Any] = {
        "model": f"{SCRIPTED_PROVIDER}/{SCRIPTED_MODEL}",
        "provider": {
            SCRIPTED_PROVIDER: {
                "api": "openai",
                "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "unused"},
                "models": {SCRIPTED_MODEL: {"limit": {"context": 128_000, "output": 4096}}},
            }
        },
        "title": False,
    }
    return deep_merge(base, overrides)


def scripted_settings(
    directory: Path,
    data_dir: Path,
    *,
    database_url: str | None = None,
    database_owner_url: str | None = None,
    **config: Any,
) -> Settings:
    return load_settings(
        data_dir=data_dir,
        database_url=database_url,
        database_owner_url=database_owner_url,
        directory=directory,
        config_override=scripted_config(**config),
    )


@asynccontextmanager
async def scripted_runtime(
    directory: Path,
    data_dir: Path,
    model: StreamFn,
    *,
    clock: Clock = SYSTEM_CLOCK,
    database_url: str | None = None,
    database_owner_url: str | None = None,
    **config: Any,
) -> AsyncIterator[Runtime]:
    """An open runtime whose model calls go to `model`, closed on exit. On Postgres,
    `database_owner_url` is the role that migrates (the runtime role owns nothing)."""
    settings = scripted_settings(
        directory, data_dir, database_url=database_url, database_owner_url=database_owner_url, **config
    )
    runtime = await Runtime.open(settings, stream=model, clock=clock)
    try:
        yield runtime
    finally:
        await runtime.close()
