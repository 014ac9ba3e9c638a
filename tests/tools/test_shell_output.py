from __future__ import annotations

from pathlib import Path

from agentforge.tools.shell_output import ShellOutput
from agentforge.tools.truncation import TruncationLimits
from tests.tools.harness import text_of


async def test_multibyte_characters_split_across_chunks(tmp_path: Path) -> None:
    output = ShellOutput(tmp_path, TruncationLimits())
    euro = "€".encode()
    await output.add(b"price: " + euro[:2])
    await output.add(euro[2:] + b"5\n")
    final = await output.finish()
    assert final.text == "price: €5\n"
    assert final.truncated is False and final.output_path is None


async def test_small_output_stays_in_memory(tmp_path: Path) -> None:
    output = ShellOutput(tmp_path, TruncationLimits(max_lines=10, max_bytes=100))
    await output.add(b"a\nb\n")
    assert not output.spilled
    assert (await output.finish()).text == "a\nb\n"
    assert not (tmp_path / "tool-output").exists()


async def test_spills_once_over_the_byte_limit_and_keeps_the_tail(tmp_path: Path) -> None:
    output = ShellOutput(tmp_path, TruncationLimits(max_lines=1000, max_bytes=100))
    lines = [f"line {i:03}\n".encode() for i in range(50)]  # 9 bytes each, 450 in all
    for line in lines:
        await output.add(line)
    assert output.spilled
    final = await output.finish()
    assert final.truncated is True and final.output_path is not None
    assert text_of(final.output_path) == b"".join(lines).decode()
    header, _, tail = final.text.partition("\n\n" + "Full output saved to: " + final.output_path + "\n\n")
    assert header == "...output truncated..."
    assert tail.endswith("line 048\nline 049\n")
    assert len(tail.encode()) <= 100


async def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    output = ShellOutput(tmp_path, TruncationLimits())
    await output.add(b"bad \xff byte\n")
    assert (await output.finish()).text == "bad \ufffd byte\n"


async def test_the_saved_output_stops_at_its_cap_while_the_tail_follows(tmp_path: Path) -> None:
    output = ShellOutput(tmp_path, TruncationLimits(max_lines=1000, max_bytes=100), max_total_bytes=300)
    lines = [f"line {i:03}\n".encode() for i in range(100)]  # 900 bytes: three times the cap
    for line in lines:
        await output.add(line)
    final = await output.finish()
    assert final.output_path is not None
    saved = text_of(final.output_path)
    assert len(saved.encode()) <= 300
    assert saved == b"".join(lines)[: len(saved)].decode()  # the start, unbroken
    assert f"Output saved to {final.output_path} up to 300 bytes; the rest was not kept" in final.text
    assert final.text.endswith("line 098\nline 099\n")  # what the model sees is still the end
