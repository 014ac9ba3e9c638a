"""`/` and the console's assets: open without a key (they hold no data), always with the strict
Content-Security-Policy, same-origin only."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.server.test_auth import REQUIRED, serve


async def test_the_console_is_served_with_a_strict_csp_while_the_api_needs_a_key(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        page = await forge.client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        # Every script comes from this origin, none is inline; nothing is loaded from elsewhere.
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, re.S)
        assert scripts and all('src="/console/' in attrs and not body.strip() for attrs, body in scripts)
        assert not re.search(r"\son\w+=", page.text)
        assert "http://" not in page.text and "https://" not in page.text
        for name, media_type in [("app.js", "text/javascript"), ("app.css", "text/css")]:
            asset = await forge.client.get(f"/console/{name}")
            assert asset.status_code == 200
            assert asset.headers["content-type"].startswith(media_type)
            assert asset.headers["content-security-policy"] == csp
        assert "url(http" not in (await forge.client.get("/console/app.css")).text
        assert (await forge.client.get("/session")).status_code == 401


async def test_unknown_assets_are_404_and_unchanged_ones_304(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, {}) as forge:
        missing = await forge.client.get("/console/..%2Fconfig.py")
        assert missing.status_code == 404
        assert missing.json()["name"] == "NotFoundError"
        assert (await forge.client.get("/console/nope.js")).status_code == 404
        first = await forge.client.get("/console/app.js")
        again = await forge.client.get("/console/app.js", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        licences = await forge.client.get("/console/LICENSES.txt")
        for vendored in ("preact", "marked", "dompurify", "highlight.js"):
            assert vendored in licences.text
