"""Tools that need approval behind the invoke API: only a tool's own approver can answer."""

from __future__ import annotations

from pathlib import Path

from glassagent import LLMResponse, ToolCall, tool
from glassagent.server import ServerLimits, create_app
from glassagent.testing import ScriptedClient
from tests.support.server import INVOKE, http, sse_events

DELETE = LLMResponse("", tool_calls=(ToolCall("c1", "delete", {"path": "notes.txt"}),))
deleted: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


async def test_a_call_needing_approval_waits_until_the_run_timeout_and_keeps_nothing(
    tmp_path: Path,
) -> None:
    """No request can answer the call: the turn ends 504 at run_timeout, nothing appended."""
    deleted.clear()
    model = ScriptedClient([DELETE, DELETE])  # one for each request
    limits = ServerLimits(run_timeout=0.5)
    app = create_app(model=model, tools=[delete], store=tmp_path, limits=limits)
    body = {"message": "Delete notes.txt", "chat_id": "c", "append_to_history": True}
    async with http(app) as client:
        answer = await client.post(INVOKE, json=body)
        streamed = await client.post(INVOKE, json={**body, "stream": True})
        chat = await client.get("/api/ai/chats/c")
    assert answer.status_code == 504
    assert answer.json()["error"]["code"] == "run_timeout"
    events = sse_events(streamed.text)
    waiting = [e for e in events if e["type"] == "approval_required"]
    assert [e["call"]["id"] for e in waiting] == ["c1"]
    assert (events[-1]["type"], events[-1]["error_type"]) == ("error", "RunTimeoutError")
    assert deleted == []
    assert chat.status_code == 404  # a failed turn appends nothing


async def test_a_tools_own_approver_answers_on_the_server() -> None:
    deleted.clear()
    asked: list[str] = []

    def ask(call: ToolCall) -> bool | str:
        asked.append(call.input["path"])
        return "not that file" if call.input["path"] == "keep.txt" else True

    guarded = tool(requires_approval=True, approver=ask)(delete.function)
    keep = LLMResponse("", tool_calls=(ToolCall("c2", "delete", {"path": "keep.txt"}),))
    model = ScriptedClient([DELETE, LLMResponse("Deleted."), keep, LLMResponse("Kept.")])
    app = create_app(model=model, tools=[guarded])
    async with http(app) as client:
        first = await client.post(INVOKE, json={"message": "Delete notes.txt"})
        second = await client.post(INVOKE, json={"message": "Delete keep.txt"})
    assert (first.status_code, first.json()["text"]) == (200, "Deleted.")
    assert (second.status_code, second.json()["text"]) == (200, "Kept.")
    assert asked == ["notes.txt", "keep.txt"]
    assert deleted == ["notes.txt"]
    declined = model.requests[3].messages[-1]
    assert declined.role == "tool"
    assert "not that file" in declined.content
