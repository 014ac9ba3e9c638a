from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.read import MAX_LINE_SUFFIX, ReadTool
from tests.tools.harness import Harness, approved_after, assert_fresh, swap_for_symlink

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def write_lines(path: Path, count: int) -> None:
    path.write_text("".join(f"line {i}\n" for i in range(1, count + 1)))


def content_lines(output: str) -> list[str]:
    body = output.split("<content>\n", 1)[1].split("\n\n(", 1)[0]
    return body.split("\n") if body else []


async def test_reads_numbered_lines_with_end_of_file_footer(harness: Harness) -> None:
    write_lines(harness.workspace / "a.txt", 3)
    result = await harness.run(ReadTool(), filePath="a.txt")
    path = harness.workspace / "a.txt"
    assert result.output == (
        f"<path>{path}</path>\n<type>file</type>\n<content>\n"
        "1: line 1\n2: line 2\n3: line 3\n\n(End of file - total 3 lines)\n</content>"
    )
    assert result.title == "a.txt"
    assert result.metadata == {"preview": "line 1\nline 2\nline 3", "truncated": False, "loaded": []}
    [ask] = harness.asked("read")
    assert ask.patterns == [str(path)] and ask.always == ["*"]


async def test_offset_and_limit_select_a_window(harness: Harness) -> None:
    write_lines(harness.workspace / "a.txt", 10)
    result = await harness.run(ReadTool(), filePath="a.txt", offset=4, limit=3)
    assert content_lines(result.output) == ["4: line 4", "5: line 5", "6: line 6"]
    assert "(Showing lines 4-6 of 10. Use offset=7 to continue.)" in result.output
    assert result.metadata["truncated"] is True


async def test_default_limit_is_2000_lines(harness: Harness) -> None:
    write_lines(harness.workspace / "big.txt", 2500)
    result = await harness.run(ReadTool(), filePath="big.txt")
    lines = content_lines(result.output)
    assert len(lines) == 2000 and lines[-1] == "2000: line 2000"
    assert "(Showing lines 1-2000 of 2500. Use offset=2001 to continue.)" in result.output


async def test_long_lines_are_cut_at_2000_chars(harness: Harness) -> None:
    (harness.workspace / "wide.txt").write_text("y" * 2500 + "\nshort\n")
    result = await harness.run(ReadTool(), filePath="wide.txt")
    first, second = content_lines(result.output)
    assert first == "1: " + "y" * 2000 + MAX_LINE_SUFFIX
    assert second == "2: short"


async def test_output_is_capped_at_50_kb(harness: Harness) -> None:
    (harness.workspace / "fat.txt").write_text("".join("z" * 999 + "\n" for _ in range(100)))
    result = await harness.run(ReadTool(), filePath="fat.txt")
    lines = content_lines(result.output)
    assert len(lines) == 51  # 51 lines of 1000 bytes fit in 51200 bytes, a 52nd does not
    assert "(Output capped at 50 KB. Showing lines 1-51. Use offset=52 to continue.)" in result.output
    assert result.metadata["truncated"] is True


async def test_offset_beyond_end_of_file_is_an_error(harness: Harness) -> None:
    write_lines(harness.workspace / "a.txt", 3)
    with pytest.raises(ToolError, match=r"Offset 10 is out of range for this file \(3 lines\)"):
        await harness.run(ReadTool(), filePath="a.txt", offset=10)


async def test_empty_file(harness: Harness) -> None:
    (harness.workspace / "empty.txt").write_text("")
    result = await harness.run(ReadTool(), filePath="empty.txt")
    assert "(End of file - total 0 lines)" in result.output


async def test_missing_file_suggests_similar_siblings(harness: Harness) -> None:
    for name in ("config.yaml", "config.json", "configure.py", "unrelated.txt"):
        (harness.workspace / name).write_text("x")
    with pytest.raises(ToolError) as caught:
        await harness.run(ReadTool(), filePath="config")
    message = str(caught.value)
    assert message.startswith(
        f"File not found: {harness.workspace / 'config'}\n\nDid you mean one of these?\n"
    )
    suggestions = message.split("Did you mean one of these?\n")[1].split("\n")
    assert len(suggestions) == 3
    assert str(harness.workspace / "unrelated.txt") not in suggestions


async def test_missing_file_with_a_typo_is_suggested(harness: Harness) -> None:
    (harness.workspace / "settings.py").write_text("x")
    with pytest.raises(ToolError, match=r"settings\.py"):
        await harness.run(ReadTool(), filePath="setings.py")


async def test_missing_file_without_siblings_is_plain(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await harness.run(ReadTool(), filePath="nothing/here.txt")
    assert str(caught.value) == f"File not found: {harness.workspace / 'nothing' / 'here.txt'}"


async def test_directory_lists_sorted_entries(harness: Harness) -> None:
    (harness.workspace / "src").mkdir()
    (harness.workspace / "b.txt").write_text("")
    (harness.workspace / "A.md").write_text("")
    result = await harness.run(ReadTool(), filePath=".")
    assert result.output == (
        f"<path>{harness.workspace}</path>\n<type>directory</type>\n<entries>\n"
        "A.md\nb.txt\nsrc/\n\n(3 entries)\n</entries>"
    )


async def test_directory_paging(harness: Harness) -> None:
    for i in range(5):
        (harness.workspace / f"f{i}").write_text("")
    result = await harness.run(ReadTool(), filePath=".", offset=2, limit=2)
    assert "\nf1\nf2\n" in result.output
    assert "(Showing 2 of 5 entries. Use 'offset' parameter to read beyond entry 3)" in result.output
    assert result.metadata["truncated"] is True


async def test_binary_by_nul_byte_is_refused(harness: Harness) -> None:
    (harness.workspace / "blob").write_bytes(b"abc\0def")
    with pytest.raises(ToolError, match="Cannot read binary file"):
        await harness.run(ReadTool(), filePath="blob")


async def test_binary_by_extension_is_refused(harness: Harness) -> None:
    (harness.workspace / "x.pyc").write_text("looks like text")
    with pytest.raises(ToolError, match="Cannot read binary file"):
        await harness.run(ReadTool(), filePath="x.pyc")


async def test_binary_by_non_printable_ratio_is_refused(harness: Harness) -> None:
    (harness.workspace / "noise").write_bytes(bytes([1, 2, 3, 4, 65]) * 100)
    with pytest.raises(ToolError, match="Cannot read binary file"):
        await harness.run(ReadTool(), filePath="noise")


async def test_image_becomes_a_data_url_attachment(harness: Harness) -> None:
    (harness.workspace / "dot.png").write_bytes(PNG)
    result = await harness.run(ReadTool(), filePath="dot.png")
    assert result.output == "Image read successfully"
    [attachment] = result.attachments
    assert attachment.mime == "image/png"
    assert attachment.url == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert attachment.filename == "dot.png"


async def test_pdf_becomes_an_attachment(harness: Harness) -> None:
    (harness.workspace / "doc.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    result = await harness.run(ReadTool(), filePath="doc.pdf")
    assert result.output == "PDF read successfully"
    assert result.attachments[0].mime == "application/pdf"
    assert result.attachments[0].url.startswith("data:application/pdf;base64,")


async def test_svg_is_read_as_text(harness: Harness) -> None:
    (harness.workspace / "icon.svg").write_text("<svg></svg>\n")
    result = await harness.run(ReadTool(), filePath="icon.svg")
    assert "1: <svg></svg>" in result.output
    assert result.attachments == []


async def test_read_records_the_read_for_edit_and_write(harness: Harness) -> None:
    path = harness.workspace / "a.txt"
    path.write_text("x\n")
    with pytest.raises(ToolError):
        assert_fresh(harness.session_id, path)
    await harness.run(ReadTool(), filePath=str(path))
    assert_fresh(harness.session_id, path)


async def test_path_traversal_is_refused(harness: Harness, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ReadTool(), filePath="../secret.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ReadTool(), filePath=str(tmp_path / "secret.txt"))
    (harness.workspace / "sneaky").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ReadTool(), filePath="sneaky")
    assert harness.asked("read") == []  # refused before the read permission is even asked
    assert len(harness.asked("external_directory")) == 3


async def test_saved_truncated_output_can_be_read_back(harness: Harness) -> None:
    saved = harness.data_dir / "tool-output" / "tool_x"
    saved.parent.mkdir(parents=True)
    saved.write_text("full output\n")
    result = await harness.run(ReadTool(), filePath=str(saved))
    assert "1: full output" in result.output


async def test_crlf_file_lines_have_no_carriage_returns(harness: Harness) -> None:
    (harness.workspace / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await harness.run(ReadTool(), filePath="win.txt")
    assert content_lines(result.output) == ["1: one", "2: two"]


async def test_a_symlink_swapped_in_while_the_read_waits_is_not_followed(
    harness: Harness, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("another tenant's secret")
    notes = harness.workspace / "notes.txt"
    notes.write_text("mine\n")
    harness.ask_override = approved_after(lambda: swap_for_symlink(notes, tmp_path / "secret.txt"))
    with pytest.raises(ToolError, match="no longer where its path led") as refused:
        await harness.run(ReadTool(), filePath="notes.txt")
    assert "secret" not in str(refused.value).replace("secret.txt", "")
