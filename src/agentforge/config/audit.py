"""The `audit` section: signed checkpoints that anchor the audit chains outside the database.

    "audit": {
      "checkpoint_key_file": "/etc/forge/checkpoint.pem",   # default: <data_dir>/audit/checkpoint-key.pem
      "checkpoint_key": "{file:/run/secrets/forge-ckpt}",   # or the PEM itself
      "checkpoint_file": "/srv/audit/checkpoints.jsonl",    # default: <data_dir>/audit/checkpoints.jsonl
      "checkpoint_interval": 3600,                          # seconds; 0: only `audit checkpoint`
      "checkpoint_max_age": 7200                            # what `doctor` still calls recent
    }

The key is an Ed25519 private key in PEM (PKCS#8). It never goes into the database: whoever can
rewrite the database must not also hold the key or the checkpoints, so keep both off the database's
host (for SQLite: outside the data directory the database lives in, or owned by another user).
Server-wide: no tenant overlay may set it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_CHECKPOINT_INTERVAL = 3600.0


class AuditConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checkpoint_key: str | None = None
    checkpoint_key_file: str | None = None
    checkpoint_file: str | None = None
    checkpoint_interval: float = Field(default=DEFAULT_CHECKPOINT_INTERVAL, ge=0)
    checkpoint_max_age: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_key_source(self) -> AuditConfig:
        if self.checkpoint_key is not None and self.checkpoint_key_file is not None:
            raise ValueError("give checkpoint_key or checkpoint_key_file, not both")
        return self

    def max_age(self) -> float:
        """How old the latest checkpoint may be: twice the interval (a day when periodic ones are off)."""
        if self.checkpoint_max_age is not None:
            return self.checkpoint_max_age
        return 2 * self.checkpoint_interval if self.checkpoint_interval else 86400.0

    def key_file(self, data_dir: Path) -> Path:
        if self.checkpoint_key_file is not None:
            return Path(self.checkpoint_key_file).expanduser()
        return data_dir / "audit" / "checkpoint-key.pem"

    def file(self, data_dir: Path) -> Path:
        if self.checkpoint_file is not None:
            return Path(self.checkpoint_file).expanduser()
        return data_dir / "audit" / "checkpoints.jsonl"
