"""The people in the loop during `agentforge run`: permission requests and questions of the turn.

Every request is shown (tool, what it wants, its patterns) and answered: on a terminal the user is
asked; otherwise `--approve all|none` answers at once and the decision is printed, so a run never
waits silently for a deadline. A refusal or an unanswered question is remembered: the run then exits
with `EXIT_REFUSED`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from rich.console import Console
from rich.text import Text

from agentforge.cli.render import short_input
from agentforge.cli.visible import visible
from agentforge.client import AgentForgeError, AsyncAgentForge, ServerEvent
from agentforge.model.permission import PermissionReply

Approve = Literal["ask", "all", "none"]
PERMISSION_CHOICES: dict[str, PermissionReply] = {
    "o": "once",
    "once": "once",
    "a": "always",
    "always": "always",
    "r": "reject",
    "reject": "reject",
}


class Prompter(Protocol):
    async def ask(self, prompt: str) -> str | None:
        """One line the user typed (without the newline); None at end of input."""
        ...


class TerminalPrompter:
    """Reads the answers from the terminal without blocking the event loop (events keep arriving and
    Ctrl-C still cancels the run while a prompt waits)."""

    def __init__(self, err: Console, fd: int = 0) -> None:
        self._err = err
        self._fd = fd

    async def ask(self, prompt: str) -> str | None:
        self._err.print(Text(prompt, style="bold"), end="")
        self._err.file.flush()
        return await read_line(self._fd)


async def read_line(fd: int) -> str | None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes | None] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        chunk = os.read(fd, 4096)
        if not chunk:
            done.set_result(bytes(buffer) if buffer else None)
            return
        buffer.extend(chunk)
        if b"\n" in buffer and not done.done():
            done.set_result(bytes(buffer))

    loop.add_reader(fd, readable)
    try:
        line = await done
    finally:
        loop.remove_reader(fd)
    return None if line is None else line.decode(errors="replace").split("\n", 1)[0].strip()


class Answerer:
    """Answers the permission requests and questions of one session while its turn runs."""

    def __init__(
        self,
        client: AsyncAgentForge,
        session_id: str,
        err: Console,
        *,
        approve: Approve,
        prompter: Prompter | None = None,
    ) -> None:
        if approve == "ask" and prompter is None:
            raise ValueError("asking needs a terminal")
        self._client = client
        self._err = err
        self._approve = approve
        self._prompter = prompter
        self._tools: dict[str, tuple[str, Mapping[str, Any]]] = {}  # callID -> (tool, input)
        self._tree = {session_id}  # the run's session and its subagents' sessions
        self._decided: set[str] = set()
        self._answered: set[str] = set()
        self._refused: dict[str, str] = {}  # request id -> what happened, for the exit code

    @property
    def refused(self) -> list[str]:
        """The requests refused or left unanswered during the turn."""
        return list(self._refused.values())

    async def handle(self, event: ServerEvent) -> None:
        """Takes every event of the tenant: subagents run in child sessions, and their requests
        belong to this run too."""
        props = event.properties
        if event.type == "session.created":
            self._adopt(props.get("info") or {})
            return
        if _session_of(event) not in self._tree:
            return
        if event.type == "message.part.updated":
            self._remember_tool(props.get("part") or {})
        elif event.type == "permission.asked":
            await self._permission(props)
        elif event.type == "permission.replied":
            self._permission_replied(props)
        elif event.type == "question.asked":
            await self._question(props)
        elif event.type == "question.rejected":
            self._question_rejected(props)

    def _adopt(self, info: Mapping[str, Any]) -> None:
        if info.get("parentID") in self._tree and isinstance(info.get("id"), str):
            self._tree.add(info["id"])

    def _remember_tool(self, part: Mapping[str, Any]) -> None:
        if part.get("type") == "tool" and part.get("callID"):
            state = part.get("state") or {}
            self._tools[str(part["callID"])] = (str(part.get("tool", "?")), state.get("input") or {})

    # --- permissions ----------------------------------------------------------------------------

    async def _permission(self, request: Mapping[str, Any]) -> None:
        request_id = str(request.get("id", ""))
        if request_id in self._decided:
            return
        self._note(permission_lines(request, self._tool_of(request)))
        if self._approve == "ask":
            reply, message = await self._ask_permission(request)
        else:
            reply, message = ("once" if self._approve == "all" else "reject"), None
            self._note([Text(f"--approve {self._approve}: {reply}", style="yellow")])
        if reply == "reject":
            self._refused[request_id] = f"permission {request.get('permission')} refused"
        self._answered.add(request_id)
        try:
            await self._client.permissions.reply(request_id, reply, message)
        except AgentForgeError as exc:
            self._note([Text(visible(f"could not answer {request_id}: {exc.message}"), style="red")])

    async def _ask_permission(self, request: Mapping[str, Any]) -> tuple[PermissionReply, str | None]:
        assert self._prompter is not None
        always = ", ".join(visible(p) for p in request.get("always") or [])
        hint = f" (always allows {always})" if always else ""
        while True:
            line = await self._prompter.ask(f"Allow? [o]nce, [a]lways{hint}, [r]eject: ")
            if line is None:
                return "reject", None
            choice = PERMISSION_CHOICES.get(line.lower())
            if choice is not None:
                break
            self._err.print("Type o, a or r.")
        if choice != "reject":
            return choice, None
        message = await self._prompter.ask("Tell the model why (optional, Enter to skip): ")
        return "reject", message or None

    def _permission_replied(self, props: Mapping[str, Any]) -> None:
        request_id = str(props.get("requestID", ""))
        self._decided.add(request_id)
        status, by = props.get("status"), props.get("decidedBy")
        if request_id not in self._answered:
            # Decided elsewhere: another terminal, the deadline, an abort.
            self._note([Text(visible(f"[permission] {request_id} {status} by {by}"), style="yellow")])
        if status in ("denied", "expired"):
            self._refused.setdefault(request_id, f"permission {request_id} {status}")

    def _tool_of(self, request: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
        tool = request.get("tool") or {}
        return self._tools.get(str(tool.get("callID", "")))

    # --- questions ------------------------------------------------------------------------------

    async def _question(self, request: Mapping[str, Any]) -> None:
        request_id = str(request.get("id", ""))
        questions = [q for q in request.get("questions") or [] if isinstance(q, Mapping)]
        self._note(question_lines(questions))
        answers: list[list[str]] | None
        if self._approve == "ask":
            answers = await self._ask_questions(questions)
        elif self._approve == "all":
            answers = [first_option(q) for q in questions]
            self._note([Text(visible(f"--approve all: answered {answers}"), style="yellow")])
        else:
            answers = None
            self._note([Text("--approve none: question dismissed", style="yellow")])
        try:
            if answers is None:
                await self._client.questions.reject(request_id)
            else:
                await self._client.questions.reply(request_id, answers)
        except AgentForgeError as exc:
            self._note([Text(visible(f"could not answer {request_id}: {exc.message}"), style="red")])

    async def _ask_questions(self, questions: Sequence[Mapping[str, Any]]) -> list[list[str]] | None:
        assert self._prompter is not None
        answers = []
        for number, question in enumerate(questions, 1):
            prompt = "Answer" if len(questions) == 1 else f"Answer {number}"
            line = await self._prompter.ask(f"{prompt} (number(s), or your own words; Enter dismisses): ")
            if not line:
                return None
            answers.append(parse_answer(question, line))
        return answers

    def _question_rejected(self, props: Mapping[str, Any]) -> None:
        reason = props.get("reason")
        if reason == "timeout":
            self._note([Text("[question] nobody answered before the deadline", style="yellow")])
        request_id = str(props.get("requestID", ""))
        self._refused.setdefault(request_id, f"question {request_id} unanswered")

    def _note(self, lines: Sequence[Text]) -> None:
        for line in lines:
            self._err.print(line)


def _session_of(event: ServerEvent) -> str | None:
    props = event.properties
    for holder in (props, props.get("part"), props.get("info")):
        if isinstance(holder, Mapping) and isinstance(holder.get("sessionID"), str):
            return str(holder["sessionID"])
    return None


def permission_lines(request: Mapping[str, Any], tool: tuple[str, Mapping[str, Any]] | None) -> list[Text]:
    head = Text("[permission] ", style="bold yellow")
    if tool is not None:
        head.append(visible(tool[0]), style="bold").append(" wants ")
    head.append(visible(request.get("permission", "?")), style="bold")
    lines = [head]
    # What is being approved, whole: every pattern on its own line, escaped, never cut.
    for pattern in request.get("patterns") or []:
        lines.append(Text("    " + visible(pattern)))
    if tool is not None and tool[1]:
        lines.append(Text("    " + short_input(tool[1], 200), style="dim"))
    return lines


def question_lines(questions: Sequence[Mapping[str, Any]]) -> list[Text]:
    lines = []
    for number, question in enumerate(questions, 1):
        head = Text("[question] ", style="bold yellow")
        if len(questions) > 1:
            head.append(f"{number}. ")
        lines.append(head.append(visible(question.get("question", "")), style="bold"))
        for index, option in enumerate(question.get("options") or [], 1):
            line = Text(f"    {index}) {visible(option.get('label', ''))}")
            if option.get("description"):
                line.append(f" - {visible(option['description'])}", style="dim")
            lines.append(line)
    return lines


def first_option(question: Mapping[str, Any]) -> list[str]:
    """What `--approve all` picks: the first option, which the model is told to make the recommended one."""
    options = question.get("options") or []
    return [str(options[0].get("label", ""))] if options else []


def parse_answer(question: Mapping[str, Any], line: str) -> list[str]:
    """Option numbers ("2" or "1,3" when several may be chosen) become their labels; anything else is
    the user's own answer."""
    labels = [str(option.get("label", "")) for option in question.get("options") or []]
    picks = [piece.strip() for piece in line.split(",")]
    numbers = all(p.isdigit() and 1 <= int(p) <= len(labels) for p in picks)
    if numbers and (len(picks) == 1 or question.get("multiple")):
        return [labels[int(p) - 1] for p in picks]
    return [line]
