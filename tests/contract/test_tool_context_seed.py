"""`ToolContext` carries what the design's context dict has: run facts, host facts, abort."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ModelSettings, ToolCall, ToolContext, tool
from glassagent.errors import UserError
from glassagent.history import HistoryStore
from glassagent.server import InvokeRequest, create_app, invoke
from glassagent.testing import ScriptedClient
from tests.support.server import INVOKE, http

SEED_KEYS = {
    "model",
    "thinking_budget",
    "chat_path",
    "history_path",
    "app_path",
    "main_port",
    "abort_event",
    "execution_id",
    "chat_id",
    "chat_manager",
    "tool_loader",
    "debug_mode",
    "system_prompt",
}


def calling(name: str, model: str = "scripted") -> ScriptedClient:
    return ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", name, {})]), "done"], model=model)


def snooping() -> tuple[list[ToolContext], Any]:
    seen: list[ToolContext] = []

    @tool
    def snoop(ctx: ToolContext) -> str:
        """Keep the context."""
        seen.append(ctx)
        return "ok"

    return seen, snoop


async def test_a_tool_sees_the_runs_model_settings_prompt_tools_and_host() -> None:
    seen, snoop = snooping()

    @tool
    def other() -> str:
        """Another tool."""
        return "other"

    agent = Agent(
        calling("snoop", model="gemini-2.5-flash"),
        [snoop, other],
        system="Be brief.",
        settings=ModelSettings(temperature=0.2),
    )
    host = {
        "app_path": "/srv/app.py",
        "main_port": 5000,
        "chat_path": "/srv/chats/c9",
        "history_path": "/srv/chats/c9/history.json",
        "chat_id": "c9",
        "debug_mode": True,
        "team": "blue",
    }
    run = agent.run("go", settings=ModelSettings(thinking_budget=8192), host=host)
    host["app_path"] = "/changed"  # the run keeps the host as it was given
    await run
    (ctx,) = seen
    assert ctx.model == "gemini-2.5-flash"
    assert ctx.thinking_budget == 8192
    assert ctx.settings.temperature == 0.2  # the agent's settings merged with the run's
    assert ctx.system_prompt == "Be brief."
    assert dict(ctx.tool_loader) == {"snoop": snoop, "other": other}
    assert ctx.execution_id == ctx.run_id == run.run_id
    assert (ctx.app_path, ctx.main_port) == ("/srv/app.py", "5000")
    assert (ctx.chat_path, ctx.history_path) == ("/srv/chats/c9", "/srv/chats/c9/history.json")
    assert (ctx.chat_id, ctx.chat_manager) == ("c9", None)
    assert ctx.debug_mode is True
    assert ctx.host["team"] == "blue"
    with pytest.raises(TypeError):
        ctx.host["team"] = "red"  # type: ignore[index]


async def test_without_a_host_its_facts_are_none_and_debug_follows_the_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen, snoop = snooping()
    await Agent(calling("snoop"), [snoop]).run("go")
    with caplog.at_level("DEBUG", logger="glassagent"):
        await Agent(calling("snoop"), [snoop]).run("go")
        loud = seen[1].debug_mode  # read when asked: the logger's level now
    quiet = seen[0]
    assert quiet.thinking_budget is None
    assert quiet.system_prompt is None
    assert [quiet.app_path, quiet.main_port, quiet.chat_id, quiet.chat_manager] == [None] * 4
    assert quiet.debug_mode is False
    assert loud is True


def test_a_host_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(UserError, match="`host` must be a mapping"):
        Agent(calling("x")).run("go", host=["app_path"])  # type: ignore[arg-type]


async def test_the_seed_dict_has_exactly_the_seeds_keys() -> None:
    seen, snoop = snooping()
    await Agent(calling("snoop"), [snoop], system="S").run("go", host={"main_port": "5000"})
    seed = seen[0].to_seed_dict()
    assert set(seed) == SEED_KEYS
    assert isinstance(seed["abort_event"], threading.Event)
    assert seed["tool_loader"]["snoop"] is snoop
    assert (seed["main_port"], seed["system_prompt"], seed["model"]) == ("5000", "S", "scripted")


async def test_a_sync_tool_waiting_on_the_abort_flag_is_released_by_an_abort() -> None:
    released: list[float] = []

    @tool
    def wait_for_stop(ctx: ToolContext) -> str:
        """Block until the run is aborted."""
        started = time.perf_counter()
        if not ctx.abort_flag.wait(5):
            return "never released"
        released.append(time.perf_counter() - started)
        return "stopped"

    run = Agent(calling("wait_for_stop"), [wait_for_stop]).run("go")

    async def consume() -> None:
        async for event in run:
            if event.type == "function_execution_start":
                await asyncio.sleep(0.05)  # the tool is waiting on its worker thread by now
                run.abort("stop")

    await consume()
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert len(released) == 1
    assert released[0] < 1.0


async def test_an_abort_flag_read_after_the_abort_is_already_set() -> None:
    flags: list[bool] = []

    @tool
    async def late(ctx: ToolContext) -> str:
        """Read the flag only after the abort."""
        await ctx.abort_event.wait()
        flags.append(ctx.abort_flag.is_set())
        return "late"

    run = Agent(calling("late"), [late]).run("go")

    async def consume() -> None:
        async for event in run:
            if event.type == "function_execution_start":
                run.abort("stop")

    await consume()
    assert flags == [True]


async def test_invoke_gives_the_tool_its_chat_id_and_store(tmp_path: Path) -> None:
    seen, snoop = snooping()
    store = HistoryStore(tmp_path)
    request = InvokeRequest(message="go", chat_id="chat-7", append_to_history=True)
    host = {"app_path": "/srv/app.py"}
    await invoke(request, clients=calling("snoop"), tools=[snoop], store=store, host=host)
    (ctx,) = seen
    assert ctx.chat_id == "chat-7"
    assert ctx.chat_manager is store
    assert ctx.app_path == "/srv/app.py"


async def test_a_turn_without_a_store_keeps_the_hosts_chat_manager() -> None:
    seen, snoop = snooping()
    manager = object()  # the application's own, as the design documents' chat_manager
    request = InvokeRequest(message="go")
    host = {"chat_manager": manager, "chat_id": "app-chat"}
    await invoke(request, clients=calling("snoop"), tools=[snoop], host=host)
    (ctx,) = seen
    assert ctx.chat_manager is manager
    assert ctx.chat_id == "app-chat"


async def test_the_http_app_gives_the_tool_its_port(tmp_path: Path) -> None:
    seen, snoop = snooping()
    app = create_app(model=calling("snoop"), tools=[snoop], store=tmp_path)
    async with http(app) as api:  # the ASGI scope's server is 127.0.0.1:8000
        body = {"message": "go", "chat_id": "c1", "append_to_history": True}
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 200, response.text
    (ctx,) = seen
    assert ctx.main_port == "8000"
    assert ctx.chat_id == "c1"
    assert ctx.chat_manager is not None
