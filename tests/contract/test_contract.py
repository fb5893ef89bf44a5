"""The design's synchronous AI-client contract (ai_client_rule.txt §3-6, §9) over glassagent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
import respx

from glassagent import LLMResponse, ToolCall, ToolContext, tool
from glassagent.contract import ContractClient, ContractStream
from glassagent.errors import (
    AuthenticationError,
    MaxIterationsExceeded,
    RateLimitError,
    RunAborted,
)
from glassagent.llm import RetryPolicy
from glassagent.testing import ScriptedClient

# The design's standard history (§4), as it writes it: one user message, one answer.
SEED_HISTORY: dict[str, Any] = {
    "conversation_id": "uuid-string",
    "title": "会話タイトル",
    "created_at": "2025-01-01T00:00:00.000Z",
    "updated_at": "2025-01-01T00:00:00.000Z",
    "model": "gemini-2.5-flash",
    "platform": "gemini",
    "messages": {
        "msg_xxxxxxxxxxxx": {
            "id": "msg_xxxxxxxxxxxx",
            "role": "user",
            "content": "こんにちは",
            "parent_id": None,
            "children_ids": ["msg_yyyyyyyyyyyy"],
            "created_at": "2025-01-01T00:00:00.000Z",
        },
        "msg_yyyyyyyyyyyy": {
            "id": "msg_yyyyyyyyyyyy",
            "role": "assistant",
            "content": "こんにちは!",
            "parent_id": "msg_xxxxxxxxxxxx",
            "children_ids": [],
            "created_at": "2025-01-01T00:00:01.000Z",
        },
    },
    "root_id": "msg_xxxxxxxxxxxx",
    "current_node": "msg_yyyyyyyyyyyy",
}

SEARCH_CALL = ToolCall("call_xxxx", "web_search", {"query": "検索クエリ"})


class SeedToolLoader:
    """A tool loader as the design's skeleton calls it: ``execute_tool(name, args, context)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def execute_tool(self, name: str, arguments: dict[str, Any], context: dict[str, Any]) -> Any:
        self.calls.append((name, arguments, context))
        return {"success": True, "data": [f"result for {arguments['query']}"]}

    def get_display_name(self, name: str) -> str:
        return {"web_search": "Web検索"}.get(name, name)


def seed_context(loader: Any, abort: threading.Event | None = None) -> dict[str, Any]:
    """The design's context dict (§6)."""
    return {
        "model": "gemini-2.5-flash",
        "thinking_budget": 8192,
        "chat_path": "/path/to/chat/folder",
        "history_path": "/path/to/history.json",
        "app_path": "/path/to/app.py",
        "main_port": "5000",
        "abort_event": abort or threading.Event(),
        "execution_id": "uuid-string",
        "chat_id": "chat-uuid",
        "chat_manager": None,
        "tool_loader": loader,
        "debug_mode": False,
        "system_prompt": "...",
    }


SEARCH_DEFINITION = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def test_send_request_reads_the_standard_history_and_defaults_temperature() -> None:
    scripted = ScriptedClient(["元気です。"], model="gemini-2.5-flash")
    client = ContractClient(scripted)
    response = client.send_request(
        "gemini-2.5-flash", SEED_HISTORY, "元気?", [], system_prompt="Be brief."
    )
    assert client.extract_response_text(response) == "元気です。"
    sent = scripted.requests[0]
    assert [(m.role, m.content) for m in sent.messages] == [
        ("user", "こんにちは"),
        ("assistant", "こんにちは!"),
        ("user", "元気?"),
    ]
    assert sent.system == "Be brief."
    assert sent.settings is not None
    assert sent.settings.temperature == 0.7


def test_send_request_passes_files_settings_and_refuses_unknown_parameters(tmp_path: Any) -> None:
    picture = tmp_path / "screenshot.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n")
    scripted = ScriptedClient(["ok", "ok"])
    client = ContractClient(scripted)
    client.send_request(
        "", {}, "look", [str(picture)], temperature=0.2, thinking_budget=128, max_output_tokens=50
    )
    sent = scripted.requests[0]
    assert sent.messages[0].attachments[0].path == str(picture)
    assert sent.settings is not None
    assert (sent.settings.temperature, sent.settings.thinking_budget) == (0.2, 128)
    assert sent.settings.max_tokens == 50
    client.send_request("", {}, "again", [], temperature=None)
    assert scripted.requests[-1].settings.temperature is None  # the provider's default
    with pytest.raises(ValueError, match="Unknown parameter 'top_q'"):
        client.send_request("", {}, "x", [], top_q=0.3)
    with pytest.raises(ValueError, match="not 'other-model'"):
        client.send_request("other-model", {}, "x", [])


def test_handle_function_calls_runs_the_seed_tool_loader_and_sends_results() -> None:
    scripted = ScriptedClient([LLMResponse(tool_calls=(SEARCH_CALL,)), "見つかりました。"])
    client = ContractClient(scripted)
    loader = SeedToolLoader()
    context = seed_context(loader)
    response = client.send_request("", SEED_HISTORY, "検索して", [], tools=[SEARCH_DEFINITION])
    assert [c.name for c in response.tool_calls] == ["web_search"]
    final, executions = client.handle_function_calls(response, "", SEED_HISTORY, context)
    assert client.extract_response_text(final) == "見つかりました。"
    assert loader.calls == [("web_search", {"query": "検索クエリ"}, context)]
    assert executions == [
        {
            "function_name": "web_search",
            "tool_name": "Web検索",
            "args": {"query": "検索クエリ"},
            "result": {"success": True, "data": ["result for 検索クエリ"]},
            "has_ui": False,
            "ui_info": None,
        }
    ]
    follow_up = scripted.requests[1]
    assert [m.role for m in follow_up.messages][-3:] == ["user", "assistant", "tool"]
    assert follow_up.messages[-1].tool_call_id == "call_xxxx"
    assert '"success": true' in follow_up.messages[-1].content
    assert follow_up.tools[0].name == "web_search"


def test_handle_function_calls_runs_glassagent_tools_with_the_context_facts() -> None:
    seen: dict[str, Any] = {}

    @tool(display_name="Web検索")
    def web_search(query: str, ctx: ToolContext) -> list[str]:
        """Search the web."""
        seen.update(chat_id=ctx.chat_id, port=ctx.main_port, thinking=ctx.thinking_budget)
        return [query.upper()]

    scripted = ScriptedClient([LLMResponse(tool_calls=(SEARCH_CALL,)), "done"])
    client = ContractClient(scripted)
    response = client.send_request("", {}, "search", [], tools=[web_search], thinking_budget=64)
    final, executions = client.handle_function_calls(response, "", {}, seed_context(None))
    assert final.text == "done"
    assert seen == {"chat_id": "chat-uuid", "port": "5000", "thinking": 64}
    assert executions[0]["tool_name"] == "Web検索"
    assert executions[0]["result"] == ["検索クエリ".upper()]


def test_an_unknown_tool_and_a_failing_loader_go_back_to_the_model_as_errors() -> None:
    class Broken(SeedToolLoader):
        def execute_tool(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
            raise OSError("disk on fire")

    scripted = ScriptedClient([LLMResponse(tool_calls=(SEARCH_CALL,)), "sorry"])
    client = ContractClient(scripted)
    response = client.send_request("", {}, "x", [], tools=[SEARCH_DEFINITION])
    final, executions = client.handle_function_calls(response, "", {}, seed_context(Broken()))
    assert final.text == "sorry"
    assert "disk on fire" in executions[0]["result"]
    assert scripted.requests[1].messages[-1].is_error

    scripted = ScriptedClient([LLMResponse(tool_calls=(SEARCH_CALL,)), "no tool"])
    client = ContractClient(scripted)
    response = client.send_request("", {}, "x", [])
    _, executions = client.handle_function_calls(response, "", {}, {})
    assert "unknown tool 'web_search'" in executions[0]["result"]


def test_tool_rounds_are_bounded_and_an_abort_stops_the_calls() -> None:
    endless = [LLMResponse(tool_calls=(SEARCH_CALL,))] * 5
    client = ContractClient(ScriptedClient(endless), max_tool_rounds=2)
    response = client.send_request("", {}, "x", [], tools=[SEARCH_DEFINITION])
    with pytest.raises(MaxIterationsExceeded, match="after 2 rounds"):
        client.handle_function_calls(response, "", {}, seed_context(SeedToolLoader()))

    stop = threading.Event()
    stop.set()
    loader = SeedToolLoader()
    client = ContractClient(ScriptedClient(endless))
    response = client.send_request("", {}, "x", [], tools=[SEARCH_DEFINITION])
    with pytest.raises(RunAborted) as caught:
        client.handle_function_calls(response, "", {}, seed_context(loader, stop))
    assert caught.value.reason == "user_abort"
    assert loader.calls == []


def test_the_stream_yields_the_design_events_round_by_round() -> None:
    @tool(display_name="Web検索")
    async def web_search(query: str, ctx: ToolContext) -> dict[str, Any]:
        """Search the web."""
        await ctx.progress("検索中...")
        return {"success": True, "data": [query]}

    answers = [
        LLMResponse("探します", tool_calls=(SEARCH_CALL,), thinking="考え中"),
        "見つかりました",
    ]
    client = ContractClient(ScriptedClient(answers))
    stream = client.send_request_stream("", {}, "検索して", [], tools=[web_search])
    assert isinstance(stream, ContractStream)
    events = list(client.handle_function_calls_stream(stream, "", {}, seed_context(None)))
    assert [e["type"] for e in events] == [
        "thinking_chunk",
        "text_chunk",
        "function_call_start",
        "function_execution_start",
        "tool_progress",
        "function_execution_complete",
        "sending_function_response",
        "text_chunk",
        "complete",
    ]
    assert events[1] == {"type": "text_chunk", "text": "探します", "is_follow_up": False}
    assert events[2] == {
        "type": "function_call_start",
        "function_name": "web_search",
        "tool_name": "Web検索",
        "args": {"query": "検索クエリ"},
    }
    assert events[3] == {"type": "function_execution_start", "count": 1}
    assert events[4] == {"type": "tool_progress", "tool": "web_search", "message": "検索中..."}
    assert events[5]["execution"]["result"] == {"success": True, "data": ["検索クエリ"]}
    assert events[7] == {"type": "text_chunk", "text": "見つかりました", "is_follow_up": True}
    assert events[8] == {"type": "complete", "text": "見つかりました"}


def test_a_plain_stream_ends_with_complete() -> None:
    client = ContractClient(ScriptedClient(["one two three"]))
    events = list(client.send_request_stream("", SEED_HISTORY, "count", []))
    assert "".join(e["text"] for e in events if e["type"] == "text_chunk") == "one two three"
    assert events[-1] == {"type": "complete", "text": "one two three"}


@pytest.mark.parametrize("how", ["abort_signal", "abort_streaming"])
def test_an_abort_ends_the_stream_promptly_with_the_text_so_far(how: str) -> None:
    words = " ".join(f"w{i}" for i in range(30))
    client = ContractClient(ScriptedClient([words], chunk_delay=0.5))
    signal = threading.Event()
    stream = client.send_request_stream("", {}, "talk", [], abort_signal=signal)
    first = next(stream)
    assert first["type"] == "text_chunk"
    if how == "abort_signal":
        signal.set()
    else:
        client.abort_streaming()
    rest = list(stream)
    # The next chunk was half a second away: the abort came first, while waiting for it.
    assert rest == [{"type": "aborted", "text": first["text"], "reason": "user_abort"}]
    assert stream.response is None


def test_send_function_response_continues_a_standard_history() -> None:
    history = {
        **SEED_HISTORY,
        "messages": {
            **SEED_HISTORY["messages"],
            "msg_zzzzzzzzzzzz": {
                "id": "msg_zzzzzzzzzzzz",
                "role": "assistant",
                "content": "",
                "parent_id": "msg_yyyyyyyyyyyy",
                "children_ids": [],
                "created_at": "2025-01-01T00:00:02.000Z",
                "tool_calls": [
                    {
                        "tool_call_id": "call_xxxx",
                        "function_name": "web_search",
                        "arguments": {"query": "検索クエリ"},
                    }
                ],
            },
        },
        "current_node": "msg_zzzzzzzzzzzz",
    }
    history["messages"]["msg_yyyyyyyyyyyy"] = {
        **SEED_HISTORY["messages"]["msg_yyyyyyyyyyyy"],
        "children_ids": ["msg_zzzzzzzzzzzz"],
    }
    scripted = ScriptedClient(["晴れです"])
    client = ContractClient(scripted)
    parts = [{"tool_call_id": "call_xxxx", "name": "web_search", "result": {"weather": "晴れ"}}]
    response = client.send_function_response("", history, parts, system_prompt="s")
    assert response.text == "晴れです"
    sent = scripted.requests[0].messages
    assert (sent[-1].role, sent[-1].tool_call_id) == ("tool", "call_xxxx")
    assert sent[-1].content == '{"weather": "晴れ"}'
    assert sent[-2].tool_calls[0].id == "call_xxxx"


URL = "http://127.0.0.1:9/v1/chat/completions"


@respx.mock
def test_errors_are_caught_as_the_design_says() -> None:
    client = ContractClient(
        "openai_compatible", base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-secret-1"
    )
    respx.post(URL).mock(
        return_value=httpx.Response(
            429, headers={"Retry-After": "7"}, json={"error": {"message": "slow down"}}
        )
    )
    with pytest.raises(RuntimeError, match="7 seconds") as caught:
        client.send_request("m", {}, "hi", [], retry=RetryPolicy(max_retries=0))
    assert isinstance(caught.value, RateLimitError)
    respx.post(URL).mock(return_value=httpx.Response(401, json={"error": {"message": "bad"}}))
    with pytest.raises(ValueError, match="401") as refused:
        client.send_request("m", {}, "hi", [])
    assert isinstance(refused.value, AuthenticationError)
    assert "sk-secret-1" not in repr(client)
    assert "sk-secret-1" not in client.get_masked_api_key()
    events = list(client.send_request_stream("m", {}, "hi", []))
    assert events[-1]["type"] == "error"
    assert "sk-secret-1" not in events[-1]["error"]
    client.close()


def test_a_provider_name_makes_one_client_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        ContractClient("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    client = ContractClient("openai", model="gpt-4o-mini")
    assert client.get_provider_name() == "openai"
    assert client._client_for("gpt-4o") is client._client_for("gpt-4o")
    assert client._client_for("gpt-4o").model == "gpt-4o"
    assert client.get_masked_api_key() == "sk-t...3456"
    client.close()


def test_abort_streaming_also_stops_the_tool_round() -> None:
    started = threading.Event()

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(5)  # unless the abort cancels it
        return "slept"

    call = ToolCall("c1", "slow", {})
    client = ContractClient(ScriptedClient([LLMResponse(tool_calls=(call,)), "never"]))
    stream = client.send_request_stream("", {}, "go", [], tools=[slow])
    events = client.handle_function_calls_stream(stream, "", {}, {})
    seen = [next(events)["type"] for _ in range(2)]
    assert seen == ["function_call_start", "function_execution_start"]
    threading.Timer(0.2, client.abort_streaming).start()
    rest = list(events)
    assert started.is_set()
    assert rest == [{"type": "aborted", "text": "", "reason": "user_abort"}]


def test_the_thread_helper_reads_the_design_history_dict() -> None:
    from glassagent.errors import UserError
    from glassagent.history import get_conversation_thread

    thread = get_conversation_thread(SEED_HISTORY)
    assert [m.id for m in thread] == ["msg_xxxxxxxxxxxx", "msg_yyyyyyyyyyyy"]
    with pytest.raises(UserError, match="not list"):
        get_conversation_thread([])  # type: ignore[arg-type]
