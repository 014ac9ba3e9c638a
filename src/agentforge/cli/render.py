"""How the CLI shows a live turn (from events) and a stored conversation (from messages).

Both work on wire dicts (`{type, ...}` parts, `{role, ...}` infos), the form events arrive in, so one
set of rules serves the live view and the final reconciliation. Everything the user or the model wrote
is printed as plain `Text`, never as rich markup: brackets in a prompt must not turn into styles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from agentforge.cli.visible import clip, visible
from agentforge.client import ServerEvent
from agentforge.model.message import WithParts
from agentforge.model.session import Session

INPUT_PREVIEW_CHARS = 80
OUTPUT_PREVIEW_LINES = 3
# What the bash tool reports to the model for a command that printed nothing: not a line of output.
NO_OUTPUT = "(no output)"


def shorten(text: str, limit: int) -> str:
    """One line, control characters escaped, at most `limit` characters plus what says how many more."""
    return clip(" ".join(visible(text).split()), limit)


def short_input(tool_input: Mapping[str, Any], limit: int = INPUT_PREVIEW_CHARS) -> str:
    pieces = []
    for key, value in tool_input.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        pieces.append(f"{key}={shown}")
    return shorten(" ".join(pieces), limit)


def error_text(error: Mapping[str, Any]) -> str:
    """`{name, data: {message}}` → "message (name)"."""
    name = visible(error.get("name", "Error"))
    data = error.get("data")
    message = data.get("message") if isinstance(data, Mapping) else None
    return f"{visible(message)} ({name})" if message else name


def tool_call_line(part: Mapping[str, Any]) -> Text:
    state = part.get("state") or {}
    line = Text("[tool] ", style="cyan")
    line.append(visible(part.get("tool", "?")), style="bold")
    shown = short_input(state.get("input") or {})
    if shown:
        line.append(" " + shown, style="dim")
    return line


def tool_result_line(part: Mapping[str, Any]) -> Text:
    state = part.get("state") or {}
    tool = visible(part.get("tool", "?"))
    if state.get("status") == "error":
        line = Text("[fail] ", style="red")
        return line.append(f"{tool}: {shorten(str(state.get('error', '')), 200)}")
    count = len(output_lines(state))
    line = Text("[ok]   ", style="green")
    line.append(f"{tool}: {shorten(str(state.get('title') or ''), INPUT_PREVIEW_CHARS)}")
    if not count:
        return line.append(f" {NO_OUTPUT}", style="dim")
    return line.append(f" ({count} line{'s' if count != 1 else ''} of output)", style="dim")


def output_lines(state: Mapping[str, Any]) -> list[str]:
    output = str(state.get("output", ""))
    return [] if output.strip() == NO_OUTPUT else output.splitlines()


def output_preview(part: Mapping[str, Any]) -> list[Text]:
    """The first lines of a finished tool's output, indented under its result line."""
    output = output_lines(part.get("state") or {})
    lines = [Text("    " + shorten(line, 160), style="dim") for line in output[:OUTPUT_PREVIEW_LINES]]
    if len(output) > OUTPUT_PREVIEW_LINES:
        lines.append(Text(f"    … {len(output) - OUTPUT_PREVIEW_LINES} more lines", style="dim"))
    return lines


def usage_footer(infos: Sequence[Mapping[str, Any]]) -> Text:
    """Tokens and cost of the turn's assistant messages (one per model step)."""
    total = {"input": 0, "output": 0, "reasoning": 0, "read": 0, "write": 0}
    cost = 0.0
    for info in infos:
        tokens = info.get("tokens") or {}
        cache = tokens.get("cache") or {}
        for key in ("input", "output", "reasoning"):
            total[key] += int(tokens.get(key) or 0)
        total["read"] += int(cache.get("read") or 0)
        total["write"] += int(cache.get("write") or 0)
        cost += float(info.get("cost") or 0.0)
    text = f"tokens {total['input']:,} in · {total['output']:,} out"
    if total["reasoning"]:
        text += f" · {total['reasoning']:,} reasoning"
    if total["read"] or total["write"]:
        text += f" · cache {total['read']:,} read / {total['write']:,} written"
    return Text(f"{text} · ${cost:.4f}", style="dim")


class Spinner:
    """A transient "waiting for ..." line on the terminal; nothing when stderr is not a terminal."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._status: Status | None = None

    def start(self, what: str) -> None:
        if not self._console.is_terminal:
            return
        if self._status is None:
            self._status = Status(what, console=self._console, spinner="dots")
            self._status.start()
        else:
            self._status.update(what)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


class TurnPrinter:
    """Prints a running turn: assistant text to `out` as it streams, tool calls, reasoning and errors
    to `err`, a spinner while the model or a tool works."""

    def __init__(self, out: TextIO, err: Console) -> None:
        self._out = out
        self._err = err
        self._spinner = Spinner(err)
        self._assistant_infos: dict[str, Mapping[str, Any]] = {}
        self._reasoning_shown: set[str] = set()
        self._roles: dict[str, str] = {}
        self._part_types: dict[str, str] = {}
        self._printed: dict[str, str] = {}
        self._announced: set[str] = set()
        self._finished_tools: set[str] = set()
        self._errors_shown: set[str] = set()
        self._last_text_part: str | None = None
        self._at_line_start = True
        self._wrote_text = False

    def handle(self, event: ServerEvent) -> None:
        props = event.properties
        if event.type == "message.updated":
            self._remember_message(props.get("info") or {})
        elif event.type == "message.part.updated":
            self._show_part(props.get("part") or {})
        elif event.type == "message.part.delta":
            self._show_delta(props)
        elif event.type == "session.status":
            self._show_status(props.get("status") or {})
        elif event.type == "session.error" and props.get("error"):
            self.show_error(error_text(props["error"]))

    def started(self) -> None:
        self._spinner.start("waiting for the model")

    def pause(self) -> None:
        """Before something else writes to the terminal (a prompt): stop the spinner."""
        self._spinner.stop()

    def footer(self) -> None:
        self._spinner.stop()
        infos = list(self._assistant_infos.values())
        # A turn that failed before the model answered has nothing to count.
        if any((info.get("tokens") or {}).get("input") or info.get("cost") for info in infos):
            self._err.print(usage_footer(infos))

    def finish(self, final: WithParts) -> str | None:
        """Prints whatever of the final message the stream did not show; returns its error, if any."""
        self._spinner.stop()
        wire = final.wire()
        self._remember_message(wire["info"])
        for part in wire.get("parts", []):
            self._show_part(part)
        if not self._at_line_start and self._wrote_text:
            self._write("\n")
        error = wire["info"].get("error")
        if not error:
            return None
        message = error_text(error)
        self.show_error(message)
        return message

    def show_error(self, message: str) -> None:
        if message in self._errors_shown:
            return
        self._errors_shown.add(message)
        self._note(Text("[error] ", style="bold red").append(message))

    def _remember_message(self, info: Mapping[str, Any]) -> None:
        if "id" in info and "role" in info:
            self._roles[str(info["id"])] = str(info["role"])
            if info["role"] == "assistant":
                self._assistant_infos[str(info["id"])] = info

    def _is_assistant(self, message_id: Any) -> bool:
        return self._roles.get(str(message_id)) == "assistant"

    def _show_part(self, part: Mapping[str, Any]) -> None:
        part_id, kind = str(part.get("id", "")), str(part.get("type", ""))
        self._part_types[part_id] = kind
        if not self._is_assistant(part.get("messageID")):
            return
        if kind == "text" and not part.get("synthetic"):
            self._catch_up_text(part_id, str(part.get("text", "")))
        elif kind == "tool":
            self._show_tool(part_id, part)
        elif kind == "reasoning":
            self._show_reasoning(part_id, part)

    def _show_reasoning(self, part_id: str, part: Mapping[str, Any]) -> None:
        # Shown whole once the model has finished thinking, dimmed, before the answer it led to.
        text = str(part.get("text", "")).strip()
        if not text or part_id in self._reasoning_shown or not (part.get("time") or {}).get("end"):
            return
        self._reasoning_shown.add(part_id)
        self._note(Text("[thinking] ", style="magenta").append(visible(text), style="dim italic"))

    def _catch_up_text(self, part_id: str, text: str) -> None:
        # A full update repeats what the deltas already printed; only a longer text adds anything.
        printed = self._printed.get(part_id, "")
        if len(text) > len(printed) and text.startswith(printed):
            self._write_text(part_id, text[len(printed) :])

    def _show_delta(self, props: Mapping[str, Any]) -> None:
        part_id = str(props.get("partID", ""))
        if props.get("field") != "text" or self._part_types.get(part_id) != "text":
            return
        if self._is_assistant(props.get("messageID")):
            self._write_text(part_id, str(props.get("delta", "")))

    def _show_tool(self, part_id: str, part: Mapping[str, Any]) -> None:
        status = (part.get("state") or {}).get("status")
        if status == "pending" or part_id in self._finished_tools:
            return
        if part_id not in self._announced:
            self._announced.add(part_id)
            self._note(tool_call_line(part))
            self._spinner.start(f"running {visible(part.get('tool', 'a tool'))}")
        if status in ("completed", "error"):
            self._finished_tools.add(part_id)
            self._note(tool_result_line(part))
            for line in output_preview(part):
                self._err.print(line, soft_wrap=True)
            self._spinner.start("waiting for the model")

    def _show_status(self, status: Mapping[str, Any]) -> None:
        if status.get("type") == "retry":
            note = f"[retry] attempt {status.get('attempt')}: {shorten(str(status.get('message', '')), 200)}"
            self._note(Text(note, style="yellow"))

    def _write_text(self, part_id: str, text: str) -> None:
        if not text:
            return
        if self._last_text_part not in (None, part_id) and not self._at_line_start:
            self._write("\n")
        self._last_text_part = part_id
        self._printed[part_id] = self._printed.get(part_id, "") + text
        self._wrote_text = True
        self._write(text)

    def _write(self, text: str) -> None:
        self._spinner.stop()
        self._out.write(visible(text))
        self._out.flush()
        self._at_line_start = text.endswith("\n")

    def _note(self, line: Text) -> None:
        # Tool lines go to stderr; end the current text line first so they do not land mid-sentence.
        self._spinner.stop()
        if not self._at_line_start:
            self._write("\n")
        self._err.print(line)


def format_time(epoch_ms: int | None) -> str:
    if not epoch_ms:
        return ""
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M")


def sessions_table(sessions: Sequence[Session]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("TITLE", overflow="fold")
    table.add_column("UPDATED", no_wrap=True)
    for session in sessions:
        table.add_row(
            Text(visible(session.id)), Text(visible(session.title)), Text(format_time(session.time.updated))
        )
    return table


def print_conversation(console: Console, session: Session, messages: Sequence[WithParts]) -> None:
    console.print(Text(visible(session.title), style="bold"))
    place = f"{visible(session.id)} · {visible(session.directory)}"
    details = f"{place} · updated {format_time(session.time.updated)}"
    console.print(Text(details, style="dim"))
    for message in messages:
        console.print()
        print_message(console, message.wire())


def print_message(console: Console, message: Mapping[str, Any]) -> None:
    info = message["info"]
    console.print(_message_header(info))
    for part in message.get("parts", []):
        for line in _part_lines(part):
            console.print(line)
    if info.get("error"):
        console.print(Text("[error] ", style="bold red").append(error_text(info["error"])))


def _message_header(info: Mapping[str, Any]) -> Text:
    role = visible(info.get("role", "?"))
    header = Text(f"── {role}", style="bold magenta" if role == "user" else "bold blue")
    if role == "assistant":
        header.append(f" · {visible(info.get('providerID'))}/{visible(info.get('modelID'))}", style="dim")
    created = (info.get("time") or {}).get("created")
    return header.append(f" · {format_time(created)}", style="dim")


def _part_lines(part: Mapping[str, Any]) -> list[Text]:
    kind = part.get("type")
    if kind == "text" and not part.get("synthetic"):
        return [Text(visible(part.get("text", "")))]
    if kind == "reasoning":
        return [Text(visible(part.get("text", "")), style="dim italic")]
    if kind == "file":
        name = visible(part.get("filename") or part.get("url"))
        return [Text(f"[file] {name} ({visible(part.get('mime'))})", style="cyan")]
    if kind == "tool":
        return _tool_lines(part)
    return []


def _tool_lines(part: Mapping[str, Any]) -> list[Text]:
    state = part.get("state") or {}
    lines = [tool_call_line(part)]
    if state.get("status") in ("completed", "error"):
        lines.append(tool_result_line(part))
    return lines + output_preview(part)


class JsonLinesPrinter:
    """`--format json`: every event of the turn as one JSON object per line on `out`, then the final
    assistant message as `{"type": "run.result", "properties": {"info", "parts"}}`."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def handle(self, event: ServerEvent) -> None:
        self._line({"type": event.type, "properties": event.properties})

    def started(self) -> None:
        return None

    def pause(self) -> None:
        return None

    def footer(self) -> None:
        return None

    def show_error(self, message: str) -> None:
        self._line({"type": "run.error", "properties": {"message": message}})

    def finish(self, final: WithParts) -> str | None:
        wire = final.wire()
        self._line({"type": "run.result", "properties": wire})
        error = wire["info"].get("error")
        return error_text(error) if error else None

    def _line(self, value: Mapping[str, Any]) -> None:
        self._out.write(json.dumps(value, ensure_ascii=False) + "\n")
        self._out.flush()
