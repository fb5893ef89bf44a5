"""``create_app(host=...)``: the application's facts reach the tools of every server run.

The design's context dict has ``app_path``, ``chat_path``, ``history_path``, ``main_port``,
``chat_id`` and ``debug_mode``; the application gives the first ones, the server its port
and each turn's chat (and, with a `HistoryStore`, the chat's file and folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from glassagent import LLMResponse, ToolCall, ToolContext, tool
from glassagent.errors import ConfigurationError
from glassagent.history import HistoryStore, SQLHistoryStore
from glassagent.server import create_app, user_directory
from glassagent.testing import ScriptedClient
from tests.support.server import INVOKE, http

APP = {
    "app_path": "/srv/app/app.py",
    "chat_path": "/srv/app/chats",
    "history_path": "/srv/app/history.json",
    "debug_mode": True,
}


def snooping(turns: int = 1) -> tuple[list[dict[str, Any]], Any, ScriptedClient]:
    """A tool that keeps what its context says, and a model calling it `turns` times."""
    seen: list[dict[str, Any]] = []

    @tool
    async def snoop(ctx: ToolContext) -> str:
        """Keep the context."""
        facts = ctx.to_seed_dict()
        manager = ctx.chat_manager
        if manager is not None and ctx.chat_id is not None:
            stored = await manager.aload(ctx.chat_id)
            thread = manager.get_conversation_thread(stored) if stored is not None else []
            facts["thread"] = [m.content for m in thread]
        seen.append(facts)
        return "ok"

    call = LLMResponse(tool_calls=[ToolCall("c1", "snoop", {})])
    return seen, snoop, ScriptedClient([call, "done"] * turns, model="scripted")


def facts(seen: dict[str, Any]) -> dict[str, Any]:
    names = ("app_path", "chat_path", "history_path", "main_port", "chat_id", "debug_mode")
    return {name: seen[name] for name in names}


async def test_a_tool_on_a_server_run_sees_the_applications_and_the_servers_facts() -> None:
    seen, snoop, model = snooping()
    app = create_app(model=model, tools=[snoop], host={**APP, "main_port": 5000})
    async with http(app) as api:  # the ASGI scope's server is 127.0.0.1:8000
        response = await api.post(INVOKE, json={"message": "go"})
    assert response.status_code == 200, response.text
    [one] = seen
    assert facts(one) == {**APP, "main_port": "8000", "chat_id": None}  # the server's port wins


async def test_a_file_store_gives_each_chat_its_file_and_folder(tmp_path: Path) -> None:
    seen, snoop, model = snooping(turns=2)
    app = create_app(
        model=model, tools=[snoop], store=tmp_path / "chats", host={"app_path": APP["app_path"]}
    )
    body = {"message": "go", "chat_id": "c1", "append_to_history": True}
    async with http(app) as api:
        for _ in range(2):
            response = await api.post(INVOKE, json=body)
            assert response.status_code == 200, response.text
    folder = user_directory(tmp_path / "chats", "anonymous")
    assert facts(seen[0]) == {
        "app_path": APP["app_path"],
        "chat_path": str(folder),
        "history_path": str(folder / "c1.json"),
        "main_port": "8000",
        "chat_id": "c1",
        "debug_mode": False,
    }
    assert (folder / "c1.json").is_file()
    # the seed's chat_manager.get_conversation_thread(history), on the chat as stored
    assert seen[0]["thread"] == []
    assert seen[1]["thread"] == ["go", "", "ok", "done"]


async def test_the_applications_paths_win_over_the_stores(tmp_path: Path) -> None:
    seen, snoop, model = snooping()
    app = create_app(model=model, tools=[snoop], store=HistoryStore(tmp_path), host=APP)
    async with http(app) as api:
        body = {"message": "go", "chat_id": "c2", "append_to_history": True}
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 200, response.text
    assert facts(seen[0]) == {**APP, "main_port": "8000", "chat_id": "c2"}


async def test_a_database_store_has_no_file_to_give(tmp_path: Path) -> None:
    seen, snoop, model = snooping()
    store = SQLHistoryStore(f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}")
    await store.create_schema()
    try:
        app = create_app(model=model, tools=[snoop], store=store)
        async with http(app) as api:
            body = {"message": "go", "chat_id": "c3", "append_to_history": True}
            response = await api.post(INVOKE, json=body)
    finally:
        await store.aclose()
    assert response.status_code == 200, response.text
    assert (seen[0]["chat_id"], seen[0]["history_path"], seen[0]["chat_path"]) == (
        "c3",
        None,
        None,
    )


async def test_without_a_port_from_the_asgi_server_the_applications_port_stands() -> None:
    seen, snoop, model = snooping()
    app = create_app(model=model, tools=[snoop], host={"main_port": 5000})

    async def on_a_unix_socket(scope: Any, receive: Any, send: Any) -> None:
        await app({**scope, "server": None}, receive, send)

    async with http(on_a_unix_socket) as api:
        response = await api.post(INVOKE, json={"message": "go"})
    assert response.status_code == 200, response.text
    assert seen[0]["main_port"] == "5000"


def test_path_like_values_and_a_number_port_are_taken(tmp_path: Path) -> None:
    app = create_app(
        model=ScriptedClient(["x"]),
        host={"app_path": tmp_path / "app.py", "main_port": 5000, "debug_mode": False},
    )
    assert app.state.glassagent.host == {
        "app_path": str(tmp_path / "app.py"),
        "main_port": "5000",
        "debug_mode": False,
    }


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ({"app_pth": "/srv/app.py"}, r"'app_pth' is not a host fact.*did you mean 'app_path'"),
        ({"color": "blue"}, r"'color' is not a host fact.*app_path, chat_path"),
        ({"model": "x"}, r"'model' is set by each run"),
        ({"abort_event": None}, r"'abort_event' is set by each run"),
        ({"chat_id": "c"}, r"'chat_id' is set by the server for each turn"),
        ({"chat_manager": object()}, r"'chat_manager' is set by the server"),
        ({"app_path": 5}, r"host\['app_path'\] must be a path .*, got int"),
        ({"history_path": ""}, r"host\['history_path'\] must be a path"),
        ({"debug_mode": "yes"}, r"host\['debug_mode'\] must be a bool, got str"),
        ({"main_port": "http"}, r"host\['main_port'\] must be a port number"),
        ({"main_port": 70000}, r"host\['main_port'\] must be a port number"),
        ({"main_port": True}, r"host\['main_port'\] must be a port number"),
        ({1: "x"}, r"`host` keys must be strings"),
        (["app_path"], r"`host` must be a mapping, not list"),
    ],
)
def test_a_bad_host_fact_is_a_configuration_error(host: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_app(model=ScriptedClient(["x"]), host=host)


async def test_the_user_a_request_authenticates_as_is_the_tools_user_id() -> None:
    seen: list[Any] = []

    @tool
    def who(ctx: ToolContext) -> str:
        """Say who asks."""
        seen.append(ctx.user_id)
        return "ok"

    call = LLMResponse(tool_calls=[ToolCall("c1", "who", {})])
    model = ScriptedClient([call, "done", call, "done"])
    app = create_app(model=model, tools=[who], tokens={"secret-token-alice": "alice"})
    async with http(app) as api:
        headers = {"Authorization": "Bearer secret-token-alice"}
        response = await api.post(INVOKE, json={"message": "go"}, headers=headers)
        assert response.status_code == 200, response.text
    anonymous = create_app(model=model, tools=[who])
    async with http(anonymous) as api:
        assert (await api.post(INVOKE, json={"message": "go"})).status_code == 200
    assert seen == ["alice", "anonymous"]
