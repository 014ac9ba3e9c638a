"""Issue 3 through HTTP: an MCP server's tool called by the model, and a plugin that rewrites a tool
definition, blocks a call and answers a permission request."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from tests.e2e.harness import EventCollector, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "echo_server.py"

PLUGIN = textwrap.dedent(
    """
    from agentforge.plugins import hookimpl
    from agentforge.tools.base import ToolError


    @hookimpl
    def tool_definition(tool_id, output):
        if tool_id == "glob":
            output.description = "Find files by pattern (described by the test plugin)."


    @hookimpl
    async def tool_execute_before(tool, output):
        if tool == "bash" and "forbidden" in output.args.get("command", ""):
            raise ToolError("The test plugin blocked this command.")


    @hookimpl
    def shell_env(output):
        output.env["FORGE_PLUGIN_TOKEN"] = "from-the-plugin"


    @hookimpl
    def permission_ask(request, output):
        if request.permission == "bash":
            output.status = "allow"
    """
)


async def test_an_mcp_tool_is_called_by_the_model_and_its_result_lands_in_the_part(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["mcp"] = {"echo": {"type": "local", "command": [sys.executable, str(ECHO_SERVER)]}}
    config["permission"] = {"echo_*": "allow"}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        session = await live.create_session()
        live.fake.enqueue(call("echo_echo", {"text": "hi", "times": 2}), reply("The server echoed."))
        result = await live.prompt(session["id"], "use the echo server")
        assert result.status_code == 200, result.text
        offered = {tool["function"]["name"] for tool in live.fake.requests[0]["tools"]}
        assert "echo_echo" in offered
        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        tool = next(p for m in history for p in m["parts"] if p["type"] == "tool")
        assert tool["tool"] == "echo_echo"
        assert tool["state"]["status"] == "completed"
        assert "hi" in tool["state"]["output"]


async def test_a_plugin_rewrites_a_definition_blocks_a_call_and_answers_a_permission(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    plugin_file = tmp_path / "test_plugin.py"
    plugin_file.write_text(PLUGIN)
    config = fake_provider_config(fake_openai)
    config["plugin"] = [str(plugin_file)]
    config["permission"] = {"bash": "ask"}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        session = await live.create_session()
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={session['id']}")
        live.fake.enqueue(
            call(
                "bash",
                {"command": "echo allowed-by-plugin $FORGE_PLUGIN_TOKEN", "description": "Echo a word"},
            ),
            call("bash", {"command": "echo forbidden", "description": "Echo another word"}),
            reply("Done."),
        )
        result = await live.prompt(session["id"], "run two commands")
        assert result.status_code == 200, result.text
        await events.stop()

        glob_tool = next(t for t in live.fake.requests[0]["tools"] if t["function"]["name"] == "glob")
        assert glob_tool["function"]["description"] == "Find files by pattern (described by the test plugin)."

        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        tools = [p for m in history for p in m["parts"] if p["type"] == "tool"]
        assert tools[0]["state"]["status"] == "completed"
        # `shell_env` put the plugin's variable into the command's environment.
        assert "allowed-by-plugin from-the-plugin" in tools[0]["state"]["output"]
        assert tools[1]["state"]["status"] == "error"
        assert "The test plugin blocked this command." in tools[1]["state"]["error"]
        # The plugin answered the bash permission: the request is on record, decided by the plugin
        # at once, and nobody was left waiting.
        asked = events.of_type("permission.asked")
        replied = events.of_type("permission.replied")
        assert [a.properties["permission"] for a in asked] == ["bash"]
        assert replied[0].properties["requestID"] == asked[0].properties["id"]
        assert replied[0].properties["decision"] == "policy"
        assert replied[0].properties["decidedBy"] == "plugin"
        assert (await live.client.get("/permission")).json() == []
