"""Run every deployment check for some Settings; blocking (database connections), so call it from a
thread or before the server's event loop starts."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from agentforge.config import Settings
from agentforge.doctor import confinement, database, local
from agentforge.doctor.result import CheckResult, failed, skipped
from agentforge.llm.provider import ProviderCatalog
from agentforge.store.audit_checkpoints import Checkpoint, CheckpointError
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import run_with_connection


def run_checks(settings: Settings, *, auth_configured: bool, owner_url: str | None) -> list[CheckResult]:
    dialect = parse_database_url(settings.database_url).dialect
    checkpoints = _checkpoints(settings)
    results = [
        local.check_config_keys(settings.config),
        local.check_bind(settings, auth_configured),
        local.check_data_dir(settings.data_dir),
        local.check_provider_keys(ProviderCatalog(settings.config)),
        local.check_database_kind(dialect, auth_configured),
        local.check_owner_url(dialect, owner_url),
        confinement.check_sandbox(settings),
        confinement.check_checkpoints(settings, checkpoints),
    ]
    anchors = checkpoints if isinstance(checkpoints, list) else []
    results += _database_checks(settings.database_url, owner_url, anchors)
    return results


def _checkpoints(settings: Settings) -> list[Checkpoint] | CheckpointError:
    try:
        return confinement.latest_checkpoints(settings)
    except CheckpointError as exc:
        return exc


def _database_checks(url: str, owner_url: str | None, checkpoints: list[Checkpoint]) -> list[CheckResult]:
    runtime = _on_database(url, [database.check_reachable, *database.RUNTIME_CHECKS])
    if runtime[0].failed:
        return [runtime[0], skipped("audit chains", "the database is unreachable")]
    if runtime[1].failed:
        return [*runtime, skipped("audit chains", "the database is not at the newest revision")]
    # Only the owner sees every tenant's chain (row-level security hides the rest from the runtime role).
    audit = _on_database(owner_url or url, [database.audit_chains_check(checkpoints)])
    return runtime + audit


def _on_database(url: str, checks: list[Callable[[Connection], CheckResult]]) -> list[CheckResult]:
    results: list[CheckResult] = []

    def work(conn: Connection) -> None:
        for check in checks:
            try:
                results.append(check(conn))
            except Exception as exc:
                results.append(failed(_check_name(check), _short(exc)))
                conn.rollback()

    try:
        run_with_connection(parse_database_url(url), work)
    except Exception as exc:
        if not results:
            return [failed("database reachable", _short(exc))]
        results.append(failed("database", _short(exc)))
    return results


def _check_name(check: Callable[[Connection], CheckResult]) -> str:
    return check.__name__.removeprefix("check_").replace("_", " ")


def _short(exc: BaseException) -> str:
    lines = str(getattr(exc, "orig", None) or exc).splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def deployment_checks(settings: Settings) -> list[CheckResult]:
    """Every check, with authentication and the owner role as the settings configure them."""
    return run_checks(
        settings,
        auth_configured=settings.config.auth.enabled(settings.host),
        owner_url=settings.database_owner_url,
    )


def critical_failures(results: list[CheckResult]) -> list[CheckResult]:
    return [result for result in results if result.failed and result.critical]
