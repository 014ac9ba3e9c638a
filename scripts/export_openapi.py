"""Export the server's OpenAPI contract to sdk/openapi.json and regenerate the TypeScript SDK.

    python scripts/export_openapi.py            # export, then `npm run generate` in sdk/typescript
    python scripts/export_openapi.py --check    # fail if sdk/openapi.json is not the current contract
    python scripts/export_openapi.py --no-generate

The contract does not depend on configuration, so an empty temporary data directory is enough.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
SPEC = REPOSITORY / "sdk" / "openapi.json"
TYPESCRIPT = REPOSITORY / "sdk" / "typescript"


def current_contract() -> dict[str, Any]:
    from agentforge.config import load_settings
    from agentforge.server.app import create_app

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        settings = load_settings(data_dir=root, database_url=f"sqlite:///{root / 'forge.db'}", directory=root)
        return create_app(settings).openapi()


def render(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only compare with sdk/openapi.json")
    parser.add_argument("--no-generate", action="store_true", help="export the spec, do not run openapi-ts")
    args = parser.parse_args(argv)
    text = render(current_contract())
    if args.check:
        if SPEC.read_text() != text:
            print("sdk/openapi.json is stale: run python scripts/export_openapi.py", file=sys.stderr)
            return 1
        return 0
    SPEC.write_text(text)
    print(f"wrote {SPEC.relative_to(REPOSITORY)}")
    if not args.no_generate:
        if not (TYPESCRIPT / "node_modules").is_dir():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT, check=True)
        subprocess.run(["npm", "run", "--silent", "generate"], cwd=TYPESCRIPT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
