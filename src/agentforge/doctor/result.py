"""A check's outcome: pass, warn (works, but not as a production deployment should), fail, or skip."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["pass", "warn", "fail", "skip"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    # A critical failure stops `serve --production`; every failure makes `doctor` exit non-zero.
    critical: bool = True

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def passed(name: str, detail: str) -> CheckResult:
    return CheckResult(name, "pass", detail)


def failed(name: str, detail: str, *, critical: bool = True) -> CheckResult:
    return CheckResult(name, "fail", detail, critical)


def warned(name: str, detail: str) -> CheckResult:
    return CheckResult(name, "warn", detail, critical=False)


def skipped(name: str, detail: str) -> CheckResult:
    return CheckResult(name, "skip", detail, critical=False)
