from __future__ import annotations

import pytest

from agentforge.client.errors import EventStreamError
from agentforge.client.sse import LineSplitter, SSEDecoder, SSEFrame, iter_events, to_server_event


def frames_of(lines: list[str]) -> list[SSEFrame]:
    decoder = SSEDecoder()
    return [frame for line in lines if (frame := decoder.feed(line)) is not None]


def test_frame_joins_data_lines_and_keeps_its_own_id() -> None:
    frames = frames_of(["id: 7", "event: update", "data: a", "data:b", "", "data: c", ""])
    assert frames == [SSEFrame(data="a\nb", event="update", id="7"), SSEFrame(data="c")]


def test_comments_unknown_fields_and_empty_frames_are_ignored() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(": keep-alive") is None
    assert decoder.feed("foo: bar") is None
    assert decoder.feed("") is None  # no data: nothing to dispatch
    assert decoder.feed("retry: 1500") is None
    assert decoder.feed("data: x") is None
    assert decoder.feed("") == SSEFrame(data="x", retry=1500)


def test_last_event_id_persists_across_frames_without_id() -> None:
    decoder = SSEDecoder()
    for line in ["id: 3", "data: {}", "", "data: {}", ""]:
        decoder.feed(line)
    assert decoder.last_event_id == "3"
    decoder.feed("id: bad\0id")
    assert decoder.last_event_id == "3"


def test_line_splitter_handles_crlf_cr_lf_and_chunk_boundaries() -> None:
    splitter = LineSplitter()
    assert splitter.split(b"a\r") == ["a"]
    assert splitter.split(b"\nb\rc") == ["b"]  # the LF completes the CRLF, it is not an empty line
    assert splitter.split(b"") == []
    assert splitter.split(b"d\n\n") == ["cd", ""]


def test_line_splitter_does_not_break_on_unicode_line_separators() -> None:
    # orjson leaves U+2028 and NEL unescaped inside JSON strings; str.splitlines would cut there.
    splitter = LineSplitter()
    line = 'data: {"text": "a\u2028b\x85c"}'
    assert splitter.split(line.encode() + b"\n") == [line]


def test_line_splitter_keeps_multibyte_characters_split_across_chunks() -> None:
    splitter = LineSplitter()
    encoded = "data: héllo\n".encode()
    cut = encoded.index("é".encode()) + 1
    assert splitter.split(encoded[:cut]) == []
    assert splitter.split(encoded[cut:]) == ["data: héllo"]


def test_iter_events_decodes_envelopes_with_seq_from_frame_id() -> None:
    stream = [
        b'data: {"id": "evt_1", "type": "server.connected", "properties": {}}\n\n',
        b'id: 4\ndata: {"id": "evt_2", "type": "session.updated", ',
        b'"properties": {"sessionID": "ses_1"}}\n\n',
    ]
    events = list(iter_events(stream))
    assert [(e.type, e.seq, e.session_id) for e in events] == [
        ("server.connected", None, None),
        ("session.updated", 4, "ses_1"),
    ]
    assert events[1].id == "evt_2"


@pytest.mark.parametrize("data", ["not json", "[1, 2]", '{"properties": {}}'])
def test_frames_that_are_not_envelopes_raise(data: str) -> None:
    with pytest.raises(EventStreamError):
        to_server_event(SSEFrame(data=data))


def test_non_numeric_frame_id_gives_no_seq() -> None:
    event = to_server_event(SSEFrame(data='{"type": "x", "properties": {}}', id="abc"))
    assert event.seq is None
    assert event.properties == {}
