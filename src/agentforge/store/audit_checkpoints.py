"""Signed checkpoints of the audit chains' heads, kept outside the database.

A hash chain shows an edited or deleted middle row, but not rows deleted from its end, nor a chain
whose owner edited a row and recomputed every hash after it. A checkpoint closes both: it records,
for every tenant, the seq and `row_hash` of its chain's last row, signed with an Ed25519 key that is
never stored in the database. `audit_verify.py` then checks each checkpointed row is still there
with the same hash: a missing row is a deleted tail, a different hash a rewritten chain.

One checkpoint is one JSON line (appended to a file, 0600):

    {"time": <ms>, "key": "ed25519:<sha256 of the raw public key, hex>",
     "heads": {"<tenant>": {"seq": <int>, "rowHash": "<hex>"}, ...}, "signature": "<base64>"}

The signature covers the RFC 8785 canonical JSON of the line without `signature`. `key` names the
key that signed it, so a checkpoint signed by another key is refused rather than trusted.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import orjson
from sqlalchemy import Connection, func, select

from agentforge.store.audit import canonical_json
from agentforge.store.private import create_private_file, make_private_dir
from agentforge.store.schema import audit_log

KEY_PREFIX: Final = "ed25519:"


class CheckpointError(Exception):
    """A key or a checkpoint file cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Head:
    seq: int
    row_hash: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    time: int
    key: str
    heads: Mapping[str, Head]
    signature: str = ""

    def signed_part(self) -> dict[str, Any]:
        heads = {tenant: {"seq": head.seq, "rowHash": head.row_hash} for tenant, head in self.heads.items()}
        return {"time": self.time, "key": self.key, "heads": heads}

    def line(self) -> str:
        return orjson.dumps({**self.signed_part(), "signature": self.signature}).decode()


if TYPE_CHECKING:
    # `cryptography` (several MB) is imported by the methods that use it, off the start-up path.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class CheckpointKey:
    """An Ed25519 key pair, or only its public half (enough to verify)."""

    def __init__(self, public: Ed25519PublicKey, private: Ed25519PrivateKey | None = None) -> None:
        from cryptography.hazmat.primitives import serialization

        self.public = public
        self.private = private
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.fingerprint = KEY_PREFIX + hashlib.sha256(raw).hexdigest()

    @classmethod
    def from_pem(cls, pem: bytes, *, where: str) -> CheckpointKey:
        """A private key (to sign and verify) or a public key (to verify) in PEM."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

        try:
            if b"PRIVATE KEY" in pem:
                private = serialization.load_pem_private_key(pem, password=None)
                if not isinstance(private, Ed25519PrivateKey):
                    raise CheckpointError(f"{where}: not an Ed25519 private key")
                return cls(private.public_key(), private)
            public = serialization.load_pem_public_key(pem)
        except ValueError as exc:
            raise CheckpointError(f"{where}: not a PEM key ({exc})") from None
        if not isinstance(public, Ed25519PublicKey):
            raise CheckpointError(f"{where}: not an Ed25519 public key")
        return cls(public)

    def public_pem(self) -> str:
        from cryptography.hazmat.primitives import serialization

        return self.public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    def sign(self, heads: Mapping[str, Head], *, at: int | None = None) -> Checkpoint:
        if self.private is None:
            raise CheckpointError("this key can only verify: signing needs the private key")
        unsigned = Checkpoint(
            time=at if at is not None else int(time.time() * 1000), key=self.fingerprint, heads=heads
        )
        signature = self.private.sign(canonical_json(unsigned.signed_part()))
        return Checkpoint(unsigned.time, unsigned.key, unsigned.heads, base64.b64encode(signature).decode())

    def verifies(self, checkpoint: Checkpoint) -> bool:
        from cryptography.exceptions import InvalidSignature

        if checkpoint.key != self.fingerprint:
            return False
        try:
            self.public.verify(
                base64.b64decode(checkpoint.signature), canonical_json(checkpoint.signed_part())
            )
        except (InvalidSignature, ValueError):
            return False
        return True


def load_key_file(path: Path, *, create: bool) -> CheckpointKey:
    """The key in `path`; with `create`, a new one is generated there (0600) when there is none."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if create and not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        make_private_dir(path.parent)
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            create_private_file(path, pem)
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read the checkpoint key {path}: {exc.strerror or exc}") from None
    return CheckpointKey.from_pem(pem, where=str(path))


# --- heads and the checkpoint file -----------------------------------------------------------------


def read_heads(conn: Connection) -> dict[str, Head]:
    """Every tenant's chain head, as this connection sees them."""
    last = (
        select(audit_log.c.tenant_id, func.max(audit_log.c.seq).label("seq"))
        .group_by(audit_log.c.tenant_id)
        .subquery()
    )
    query = (
        select(audit_log.c.tenant_id, audit_log.c.seq, audit_log.c.row_hash)
        .join(last, (audit_log.c.tenant_id == last.c.tenant_id) & (audit_log.c.seq == last.c.seq))
        .order_by(audit_log.c.tenant_id)
    )
    return {str(row.tenant_id): Head(int(row.seq), str(row.row_hash)) for row in conn.execute(query)}


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Append one line to the checkpoint file (created 0600, its directory 0700), on disk when this
    returns. A line torn by a crash (no newline at the file's end) is closed first, so it stays one bad
    line the verifier names instead of swallowing the new checkpoint."""
    make_private_dir(path.parent)
    line = checkpoint.line().encode() + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_checkpoints(path: Path) -> list[Checkpoint]:
    """Every checkpoint in the file, oldest first. CheckpointError names a line that is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoints {path}: {exc.strerror or exc}") from None
    return [
        _parse(line, f"{path} line {number}")
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]


def last_checkpoint(path: Path) -> Checkpoint | None:
    """The file's newest checkpoint, unverified (None when there is none). Reads only the file's end:
    the file grows by a line an interval for as long as the server runs. CheckpointError as
    `read_checkpoints`."""
    try:
        with path.open("rb") as file:
            tail = _last_line(file)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoints {path}: {exc.strerror or exc}") from None
    return _parse(tail.decode("utf-8", "replace"), f"{path}, last line") if tail else None


def _last_line(file: BinaryIO, chunk: int = 65536) -> bytes:
    end = file.seek(0, os.SEEK_END)
    tail = b""
    while end > 0 and b"\n" not in tail.rstrip():
        start = max(0, end - chunk)
        file.seek(start)
        tail = file.read(end - start) + tail
        end = start
    return tail.rstrip().rsplit(b"\n", 1)[-1].strip()


def _parse(line: str, where: str) -> Checkpoint:
    try:
        raw = orjson.loads(line)
        heads = {
            str(tenant): Head(int(head["seq"]), str(head["rowHash"])) for tenant, head in raw["heads"].items()
        }
        return Checkpoint(int(raw["time"]), str(raw["key"]), heads, str(raw["signature"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        raise CheckpointError(f"{where}: not a checkpoint") from None


def verified(checkpoints: Iterable[Checkpoint], key: CheckpointKey, path: Path) -> list[Checkpoint]:
    """The checkpoints, each one's signature checked with `key` (CheckpointError at the first bad one)."""
    checked: list[Checkpoint] = []
    for number, checkpoint in enumerate(checkpoints, 1):
        if checkpoint.key != key.fingerprint:
            raise CheckpointError(
                f"{path} checkpoint {number}: signed by {checkpoint.key}, not by {key.fingerprint}"
            )
        if not key.verifies(checkpoint):
            raise CheckpointError(f"{path} checkpoint {number}: the signature does not match its contents")
        checked.append(checkpoint)
    return checked
