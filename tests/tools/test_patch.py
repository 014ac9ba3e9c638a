from __future__ import annotations

import re

import pytest

from agentforge.tools.patch import (
    AddFile,
    DeleteFile,
    PatchError,
    TextFile,
    UpdateChunk,
    UpdateFile,
    apply_update,
    parse_patch,
    seek_sequence,
)


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


def test_parses_add_delete_update_and_move() -> None:
    hunks = parse_patch(
        patch(
            "*** Add File: new.txt",
            "+first",
            "+second",
            "*** Delete File: old.txt",
            "*** Update File: src/a.py",
            "*** Move to: src/b.py",
            "@@ def f():",
            "     x = 1",
            "-    return x",
            "+    return x + 1",
        )
    )
    assert hunks == [
        AddFile("new.txt", "first\nsecond\n"),
        DeleteFile("old.txt"),
        UpdateFile(
            "src/a.py",
            (UpdateChunk(("def f():",), ("    x = 1", "    return x"), ("    x = 1", "    return x + 1")),),
            move_to="src/b.py",
        ),
    ]


def test_several_chunks_nested_contexts_and_end_of_file() -> None:
    [hunk] = parse_patch(
        patch(
            "*** Update File: a.py",
            "@@ class A:",
            "@@     def f(self):",
            "-        pass",
            "+        return 1",
            "@@",
            " last",
            "+appended",
            "*** End of File",
        )
    )
    assert isinstance(hunk, UpdateFile)
    first, second = hunk.chunks
    assert first.contexts == ("class A:", "    def f(self):")
    assert (first.old_lines, first.new_lines) == (("        pass",), ("        return 1",))
    assert second == UpdateChunk((), ("last",), ("last", "appended"), end_of_file=True)


def test_first_chunk_may_omit_the_header_and_unified_ranges_are_not_context() -> None:
    [plain] = parse_patch(patch("*** Update File: a", "-x", "+y"))
    [ranged] = parse_patch(patch("*** Update File: a", "@@ -1,2 +1,2 @@", "-x", "+y"))
    assert isinstance(plain, UpdateFile) and isinstance(ranged, UpdateFile)
    assert plain.chunks == ranged.chunks == (UpdateChunk((), ("x",), ("y",)),)


def test_blank_lines_are_context_inside_a_chunk_but_dropped_at_its_end() -> None:
    hunk, deletion = parse_patch(
        patch("*** Update File: a", " a", "", "-b", "+c", "", "", "*** Delete File: d")
    )
    assert isinstance(hunk, UpdateFile)
    assert hunk.chunks == (UpdateChunk((), ("a", "", "b"), ("a", "", "c")),)
    assert deletion == DeleteFile("d")


def test_a_heredoc_around_the_patch_and_crlf_are_accepted() -> None:
    text = "apply_patch <<'EOF'\r\n*** Begin Patch\r\n*** Delete File: a\r\n*** End Patch\r\nEOF\r\n"
    assert parse_patch(text) == [DeleteFile("a")]


def test_a_pure_rename_needs_no_chunk() -> None:
    assert parse_patch(patch("*** Update File: a", "*** Move to: b")) == [UpdateFile("a", (), move_to="b")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the patch is empty"),
        ("   \n", "the patch is empty"),
        ("*** Delete File: a\n*** End Patch", "first line of the patch must be '*** Begin Patch'"),
        ("*** Begin Patch\n*** Delete File: a", "last line of the patch must be '*** End Patch'"),
        (patch(), "no file operations"),
        (patch("*** Frobnicate File: a"), "line 2: '*** Frobnicate File: a' is not a valid hunk header"),
        (patch("*** Update File: a"), "the update of a has no changes"),
        (patch("*** Update File: a", "@@ ctx"), "a chunk in the update of a has no lines"),
        (patch("*** Update File: a", "-x", "oops"), "line 4: unexpected line in the update of a: 'oops'"),
        (patch("*** Update File: a", "*** End of File"), "ends an empty chunk"),
        (patch("*** Add File:   "), "names no file"),
    ],
)
def test_malformed_patches_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=re.escape(message)):
        parse_patch(text)


def chunk(old: list[str], new: list[str], *contexts: str, end: bool = False) -> UpdateChunk:
    return UpdateChunk(tuple(contexts), tuple(old), tuple(new), end)


def test_apply_update_replaces_each_chunk_in_order() -> None:
    text = "a\nb\nc\nd\nb\n"
    updated = apply_update(text, [chunk(["b"], ["B"]), chunk(["d", "b"], ["D"])], "f")
    assert updated == "a\nB\nc\nD\n"


def test_context_lines_narrow_down_where_a_chunk_applies() -> None:
    text = "def f():\n    return 1\ndef g():\n    return 1\n"
    updated = apply_update(text, [chunk(["    return 1"], ["    return 2"], "def g():")], "f")
    assert updated == "def f():\n    return 1\ndef g():\n    return 2\n"


def test_matching_tolerates_trailing_whitespace_and_typographic_punctuation() -> None:
    assert apply_update("x = 1   \ny\n", [chunk(["x = 1"], ["x = 2"])], "f") == "x = 2\ny\n"
    assert apply_update("say('hi')\n", [chunk(["say(\u2018hi\u2019)"], ["say('yo')"])], "f") == "say('yo')\n"


def test_end_of_file_prefers_the_last_occurrence() -> None:
    text = "end\nmiddle\nend\n"
    assert apply_update(text, [chunk(["end"], ["END"], end=True)], "f") == "end\nmiddle\nEND\n"


def test_pure_additions_go_after_their_context_or_at_the_end() -> None:
    text = "a\nb\n"
    assert apply_update(text, [chunk([], ["x"], "a")], "f") == "a\nx\nb\n"
    assert apply_update(text, [chunk([], ["z"])], "f") == "a\nb\nz\n"


def test_a_missing_final_newline_stays_missing() -> None:
    assert apply_update("a\nb", [chunk(["b"], ["c"])], "f") == "a\nc"


def test_a_trailing_empty_old_line_may_stand_for_the_final_newline() -> None:
    assert apply_update("a\nb\n", [chunk(["b", ""], ["c", ""])], "f") == "a\nc\n"


def test_missing_context_or_lines_name_the_file_and_the_lines() -> None:
    with pytest.raises(PatchError, match=re.escape("failed to find context 'def nope' in src/x.py")):
        apply_update("a\n", [chunk(["a"], ["b"], "def nope")], "src/x.py")
    with pytest.raises(PatchError) as missing:
        apply_update("a\nb\n", [chunk(["b", "q"], ["c"])], "src/x.py")
    assert str(missing.value) == "failed to find the expected lines in src/x.py:\nb\nq"


def test_chunks_must_appear_in_order() -> None:
    with pytest.raises(PatchError, match="expected lines"):
        apply_update("a\nb\n", [chunk(["b"], ["B"]), chunk(["a"], ["A"])], "f")


def test_seek_sequence_bounds() -> None:
    lines = ["a", "b", "c"]
    assert seek_sequence(lines, [], 2) == 2
    assert seek_sequence(lines, ["b", "c"], 0) == 1
    assert seek_sequence(lines, ["b", "c"], 2) is None
    assert seek_sequence(lines, ["a", "b", "c", "d"], 0) is None


def test_text_file_keeps_bom_and_line_endings() -> None:
    original = TextFile.decode("\ufeffa\r\nb\r\n".encode(), "f")
    assert original == TextFile("a\nb\n", bom=True, crlf=True)
    assert original.encode("a\nc\n") == "\ufeffa\r\nc\r\n"
    assert TextFile.decode(b"x\n", "f").encode("y\n") == "y\n"
    with pytest.raises(PatchError, match="f is not UTF-8 text"):
        TextFile.decode(b"\xff\xfe\x00", "f")
