"""All or nothing on input (issue 11, item 6), through HTTP on SQLite and Postgres: values no store
holds answer 400 naming the field before anything is written; bodies past `server.max_body_bytes`
answer 413, chunked ones too."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentforge.server.input_guard import MAX_DEPTH, MAX_KEY_SHOWN, document_problem, json_problem
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI

TOO_BIG = 2**63


def raw_prompt(part_json: str) -> bytes:
    return ('{"parts": [' + part_json + "]}").encode()


async def post_raw(live: LiveServer, path: str, content: bytes) -> tuple[int, str]:
    """POST JSON spelled out, with BIG standing for 2^63 (BIG1 for 2^63+1)."""
    content = content.replace(b"BIG1", str(TOO_BIG + 1).encode()).replace(b"BIG", str(TOO_BIG).encode())
    response = await live.client.post(path, content=content, headers={"content-type": "application/json"})
    message = (
        response.json().get("data", {}).get("message", "") if response.status_code < 500 else response.text
    )
    return response.status_code, str(message)


@pytest.mark.parametrize(
    ("part", "field"),
    [
        ('{"type": "text", "text": "hi", "metadata": {"n": BIG}}', "parts[0].metadata.n"),
        ('{"type": "text", "text": "hi", "metadata": {"n": -BIG1}}', "parts[0].metadata.n"),
        ('{"type": "text", "text": "hi", "time": {"start": BIG}}', "parts[0].time.start"),
        ('{"type": "text", "text": "lone \\ud800 surrogate"}', "parts[0].text"),
        ('{"type": "text", "text": "nul \\u0000 inside"}', "parts[0].text"),
        ('{"type": "text", "text": "hi", "metadata": {"k\\u0000": 1}}', "parts[0].metadata.k\\x00"),
        ('{"type": "text", "text": "hi", "id": "prt_\\u0000"}', "parts[0].id"),
    ],
)
async def test_a_prompt_with_a_value_no_store_holds_is_refused_whole(
    live: LiveServer, part: str, field: str
) -> None:
    sid = (await live.create_session())["id"]

    status, message = await post_raw(live, f"/session/{sid}/message", raw_prompt(part))

    assert status == 400, message
    assert message.startswith(f"{field}: "), message
    assert (await live.client.get(f"/session/{sid}/message")).json() == []
    assert live.fake.requests == []


async def test_a_prompt_refused_in_its_second_part_stores_not_even_the_first(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    parts = '{"type": "text", "text": "fine"}, {"type": "text", "text": "x", "metadata": {"n": BIG}}'

    status, message = await post_raw(live, f"/session/{sid}/message", raw_prompt(parts))

    assert (status, message.split(":")[0]) == (400, "parts[1].metadata.n")
    assert (await live.client.get(f"/session/{sid}/message")).json() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"metadata": {"big": BIG}}', "metadata.big"),
        ('{"title": "nul \\u0000"}', "title"),
        ('{"title": "\\udfff"}', "title"),
    ],
)
async def test_a_session_with_a_value_no_store_holds_is_not_created(
    live: LiveServer, body: str, field: str
) -> None:
    status, message = await post_raw(live, "/session", body.encode())

    assert status == 400, message
    assert message.startswith(f"{field}: ")
    assert (await live.client.get("/session")).json() == []


async def test_updating_a_session_with_an_archive_time_past_64_bits_changes_nothing(live: LiveServer) -> None:
    sid = (await live.create_session(title="kept"))["id"]
    before = (await live.client.get(f"/session/{sid}")).json()

    response = await live.client.patch(
        f"/session/{sid}", json={"title": "new", "time": {"archived": TOO_BIG}}
    )

    assert response.status_code == 400, response.text
    assert response.json()["data"]["message"].startswith("time.archived: ")
    assert (await live.client.get(f"/session/{sid}")).json() == before


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (f"/session?start={TOO_BIG}", "start"),
        ("/session?start=-1", "start"),
        (f"/session?limit={TOO_BIG * 2}", "limit"),
        ("/session?search=%00", "search"),
        ("/session?directory=a%00b", "directory"),
        (f"/audit?after={TOO_BIG}", "after"),
    ],
)
async def test_query_values_no_store_holds_answer_400_naming_them(
    live: LiveServer, query: str, field: str
) -> None:
    response = await live.client.get(query)

    assert response.status_code == 400, response.text
    assert field in response.json()["data"]["message"]


async def test_message_list_limit_and_path_ids_are_checked(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    too_many = await live.client.get(f"/session/{sid}/message?limit={TOO_BIG}")
    nul_id = await live.client.get("/session/ses_%00/message")

    assert too_many.status_code == 400, too_many.text
    assert "limit" in too_many.json()["data"]["message"]
    assert nul_id.status_code == 400, nul_id.text
    assert nul_id.json()["data"]["message"].startswith("path: ")


async def test_a_body_past_the_default_10_mb_answers_413_and_stores_nothing(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    body = {"parts": [{"type": "text", "text": "x" * (10 * 1024 * 1024)}]}

    response = await live.client.post(f"/session/{sid}/message", json=body)

    assert response.status_code == 413, response.text
    assert "server.max_body_bytes" in response.json()["data"]["message"]
    assert (await live.client.get(f"/session/{sid}/message")).json() == []
    assert live.fake.requests == []


@pytest.fixture
async def small_limit(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> AsyncIterator[LiveServer]:
    config = {**fake_provider_config(fake_openai), "server": {"max_body_bytes": 4096}}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server


async def test_a_chunked_body_is_counted_as_it_streams(small_limit: LiveServer) -> None:
    live = small_limit
    sid = (await live.create_session())["id"]

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"parts": [{"type": "text", "text": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}]}'

    headers = {"content-type": "application/json"}
    response = await live.client.post(f"/session/{sid}/message", content=chunks(), headers=headers)

    assert response.status_code == 413, response.text
    assert "4096" in response.json()["data"]["message"]
    assert (await live.client.get(f"/session/{sid}/message")).json() == []


def test_json_problem_names_the_first_value_and_passes_what_fits() -> None:
    fits: dict[str, Any] = {"a": [2**63 - 1, -(2**63), 1.5, "ok", {"é": "ü"}], "b": None, "c": True}
    assert json_problem(json.dumps(fits).encode()) is None
    assert json_problem(b'{"a": [1, {"b": 1e999}]}') == "a[1].b: numbers must be finite"
    assert json_problem(b'{"a": NaN}') == "a: numbers must be finite"
    assert json_problem(b"not json") is None  # left to the route's own validation
    assert json_problem(b'"\\u0000"') == "body: must not contain NUL characters"


async def test_a_long_key_over_deep_nesting_answers_400_naming_where_it_got_too_deep(
    live: LiveServer,
) -> None:
    sid = (await live.create_session())["id"]
    key = "k" * 200_000
    body = ('{"' + key + '": ' + "[" * 500 + "]" * 500 + "}").encode()

    status, message = await post_raw(live, f"/session/{sid}/message", body)

    assert status == 400, message
    assert message.startswith("k" * MAX_KEY_SHOWN + "...[0][0]"), message[:300]
    assert message.endswith(f": nesting is deeper than {MAX_DEPTH} levels")
    assert len(message) < 2 * MAX_KEY_SHOWN + 8 * MAX_DEPTH
    assert (await live.client.get(f"/session/{sid}/message")).json() == []


def test_nesting_the_parser_itself_cannot_follow_answers_400_too() -> None:
    assert json_problem(b"[" * 100_000 + b"]" * 100_000) == f"body: nesting is deeper than {MAX_DEPTH} levels"


def test_the_walk_does_not_copy_the_path_per_level() -> None:
    key = "k" * 1_000_000
    document = json.loads('{"' + key + '": ' + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "}")

    tracemalloc.start()
    try:
        assert document_problem(document) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Spelling the path at every level held one copy of the key per level (63 MB here); checking
    # the key's encoding makes the one transient copy left.
    assert peak < 2 * len(key), peak


async def test_a_body_without_a_content_type_is_checked_all_the_same(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    body = raw_prompt('{"type": "text", "text": "hi", "metadata": {"n": BIG}}').replace(
        b"BIG", str(TOO_BIG).encode()
    )

    response = await live.client.post(f"/session/{sid}/message", content=body)  # no content type

    assert response.status_code == 400, response.text
    assert response.json()["data"]["message"].startswith("parts[0].metadata.n: ")
    assert (await live.client.get(f"/session/{sid}/message")).json() == []
