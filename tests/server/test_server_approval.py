"""Tools that need approval behind the invoke API: a turn ends awaiting approval, and a
request with ``approvals`` resumes it from a stored chat or a posted history."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from glassagent import LLMResponse, ToolCall, tool
from glassagent.errors import UserError
from glassagent.history import History, HistoryStore
from glassagent.server import (
    ANONYMOUS_USER,
    InvokeError,
    InvokeRequest,
    ServerLimits,
    create_app,
    invoke,
    user_directory,
)
from glassagent.testing import ScriptedClient
from tests.support.server import INVOKE, http, sse_events

DELETE = LLMResponse(
    "Checking first.",
    tool_calls=(
        ToolCall("c0", "size", {"path": "notes.txt"}),
        ToolCall("c1", "delete", {"path": "notes.txt"}),
    ),
)
WAITING = [{"id": "c1", "name": "delete", "arguments": {"path": "notes.txt"}}]
TERMINAL = ("complete", "aborted", "error", "budget_exceeded", "awaiting_approval")
deleted: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


@tool
def size(path: str) -> str:
    """The size of a file."""
    return f"{path}: 3 kB"


@pytest.fixture(autouse=True)
def nothing_deleted() -> None:
    deleted.clear()


def deleting(*after: LLMResponse | str) -> ScriptedClient:
    """A model that sizes and deletes notes.txt, then answers `after`."""
    return ScriptedClient([DELETE, *after])


def stored(directory: Path, chat_id: str) -> History:
    return HistoryStore(user_directory(directory, ANONYMOUS_USER)).load(chat_id)


def roles(history: History) -> list[str]:
    return [m.role for m in history.thread()]


LIMITS = ServerLimits(run_timeout=5.0)  # a turn that waited for approval fails, not hangs
START = {"message": "Delete notes.txt", "chat_id": "c", "append_to_history": True}
RESUME = {"approvals": {"c1": True}, "chat_id": "c", "append_to_history": True}


# ---- a turn ends awaiting approval, and is resumed ---------------------------------------------


async def test_a_stored_chat_waits_for_approval_then_resumes_approved(tmp_path: Path) -> None:
    model = deleting("Deleted notes.txt.")
    app = create_app(model=model, tools=[delete, size], store=tmp_path, limits=LIMITS)
    async with http(app) as api:
        waiting = await api.post(INVOKE, json=START)
        assert deleted == []  # the call did not run before it was approved
        kept = stored(tmp_path, "c")
        resumed = await api.post(INVOKE, json=RESUME)
    body = waiting.json()
    assert waiting.status_code == 200
    assert (body["status"], body["approvals"], body["chat_id"]) == (
        "awaiting_approval",
        WAITING,
        "c",
    )
    assert body["text"] == "Checking first."
    assert roles(kept) == ["user", "assistant", "tool"]  # the size call ran and is kept
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "completed"
    assert resumed.json()["text"] == "Deleted notes.txt."
    assert "approvals" not in resumed.json()
    assert deleted == ["notes.txt"]
    chat = stored(tmp_path, "c")
    assert roles(chat) == ["user", "assistant", "tool", "tool", "assistant"]
    assert chat.thread()[3].parent_id == kept.current_node  # below the chat's current node
    seen = model.requests[1].messages
    assert [m.content for m in seen if m.role == "tool"] == ["notes.txt: 3 kB", "deleted notes.txt"]


async def test_a_posted_history_comes_back_awaiting_and_resumes_when_posted_again() -> None:
    model = deleting("Deleted notes.txt.")
    app = create_app(model=model, tools=[delete, size], limits=LIMITS)
    start = {"message": "Delete notes.txt", "append_to_history": True}
    async with http(app) as api:
        waiting = (await api.post(INVOKE, json=start)).json()
        posted = {"approvals": {"c1": True}, "history": waiting["history"]}
        resumed = await api.post(INVOKE, json={**posted, "append_to_history": True})
    assert (waiting["status"], waiting["approvals"]) == ("awaiting_approval", WAITING)
    assert [m["role"] for m in waiting["history"]["messages"]] == ["user", "assistant", "tool"]
    assert resumed.status_code == 200
    answer = resumed.json()
    assert (answer["status"], answer["text"]) == ("completed", "Deleted notes.txt.")
    assert [m["role"] for m in answer["history"]["messages"]] == [
        *("user", "assistant", "tool", "tool", "assistant")
    ]
    assert deleted == ["notes.txt"]


async def test_invoke_resumes_declined_with_a_reason_the_model_reads() -> None:
    model = deleting("I kept notes.txt.")
    tools = [delete, size]
    history = History()
    first = await invoke(
        InvokeRequest(message="Delete notes.txt", history=history, append_to_history=True),
        clients=model,
        tools=tools,
        limits=LIMITS,
    )
    assert (first.status, first.approvals) == ("awaiting_approval", (DELETE.tool_calls[1],))
    answer = InvokeRequest(
        approvals={"c1": "not that file"}, history=first.history, append_to_history=True
    )
    second = await invoke(answer, clients=model, tools=tools, limits=LIMITS)
    assert (second.status, second.text, second.approvals) == ("completed", "I kept notes.txt.", ())
    declined = model.requests[1].messages[-1]
    assert (declined.role, declined.tool_call_id) == ("tool", "c1")
    assert "declined" in declined.content
    assert "not that file" in declined.content
    assert deleted == []
    assert [m.role for m in history.thread()][-2:] == ["tool", "assistant"]


async def test_calls_left_unanswered_keep_waiting() -> None:
    both = LLMResponse(
        tool_calls=(
            ToolCall("c1", "delete", {"path": "a.txt"}),
            ToolCall("c2", "delete", {"path": "b.txt"}),
        )
    )
    model = ScriptedClient([both, "Done."])
    app = create_app(model=model, tools=[delete], limits=LIMITS)
    async with http(app) as api:
        first = (await api.post(INVOKE, json={"message": "Go", "append_to_history": True})).json()
        body = {"history": first["history"], "append_to_history": True}
        second = (await api.post(INVOKE, json={**body, "approvals": {"c2": True}})).json()
        assert deleted == ["b.txt"]
        body = {"history": second["history"], "append_to_history": True}
        third = (await api.post(INVOKE, json={**body, "approvals": {"c1": False}})).json()
    assert [a["id"] for a in first["approvals"]] == ["c1", "c2"]
    assert (second["status"], [a["id"] for a in second["approvals"]]) == (
        "awaiting_approval",
        ["c1"],
    )
    assert (third["status"], third["text"]) == ("completed", "Done.")
    assert deleted == ["b.txt"]


async def test_a_stream_ends_with_the_status_and_the_calls_awaiting(tmp_path: Path) -> None:
    app = create_app(
        model=deleting("Deleted."), tools=[delete, size], store=tmp_path, limits=LIMITS
    )
    async with http(app) as api:
        waiting = sse_events((await api.post(INVOKE, json={**START, "stream": True})).text)
        resumed = sse_events((await api.post(INVOKE, json={**RESUME, "stream": True})).text)
    kinds = [e["type"] for e in waiting]
    assert sum(kind in TERMINAL for kind in kinds) == 1
    assert "approval_required" in kinds
    last = waiting[-1]
    assert (last["type"], last["status"], last["approvals"]) == (
        "awaiting_approval",
        "awaiting_approval",
        WAITING,
    )
    assert last["chat_id"] == "c"  # sent once the turn is kept
    assert [e["seq"] for e in waiting] == list(range(len(waiting)))
    kinds = [e["type"] for e in resumed]
    assert kinds[0] == "function_call_start"  # the waiting call's round comes first
    assert "approval_answered" in kinds
    assert (resumed[-1]["type"], resumed[-1]["status"]) == ("complete", "completed")
    assert "approvals" not in resumed[-1]
    assert deleted == ["notes.txt"]


# ---- what a resuming request may not do --------------------------------------------------------


def problems_of(response: Any) -> list[str]:
    return [p["location"] for p in response.json()["error"]["problems"]]


@pytest.mark.parametrize(
    ("body", "locations"),
    [
        ({"message": "And?", **RESUME}, ["message"]),
        ({**RESUME, "approvals": ["c1"]}, ["approvals"]),
        ({**RESUME, "approvals": "yes"}, ["approvals"]),
        ({**RESUME, "approvals": {}}, ["approvals"]),
        ({**RESUME, "approvals": {"c1": 1, "c2": None}}, ["approvals.c1", "approvals.c2"]),
        ({**RESUME, "approvals": {"": True}}, ["approvals"]),
        ({**RESUME, "approvals": {"x" * 513: True}}, ["approvals"]),
        ({**RESUME, "approvals": {f"c{i}": True for i in range(4)}}, ["approvals"]),
        ({"approvals": {"c1": True}}, ["approvals"]),  # no conversation
        ({"chat_id": "c"}, ["message"]),  # neither a message nor approvals
    ],
    ids=[
        "with-message",
        "array",
        "string",
        "empty",
        "not-bool-or-string",
        "empty-id",
        "long-id",
        "too-many",
        "no-conversation",
        "nothing",
    ],
)
async def test_malformed_approvals_are_422_at_their_location(
    tmp_path: Path, body: dict[str, Any], locations: list[str]
) -> None:
    limits = ServerLimits(max_approvals=3, run_timeout=5.0)
    app = create_app(model=deleting(), tools=[delete, size], store=tmp_path, limits=limits)
    async with http(app) as api:
        await api.post(INVOKE, json=START)
        answer = await api.post(INVOKE, json=body)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_request"
    assert problems_of(answer) == locations
    assert deleted == []


async def test_invoke_checks_approvals_built_in_code() -> None:
    history = History()
    request = InvokeRequest(message="And?", approvals={"c1": 3}, history=history)  # type: ignore[dict-item]
    with pytest.raises(InvokeError) as refused:
        await invoke(request, clients=deleting(), tools=[delete])
    assert refused.value.status == 422
    assert [p.location for p in refused.value.problems] == ["message", "approvals.c1"]
    with pytest.raises(UserError, match="max_approvals"):
        ServerLimits(max_approvals=0)


async def test_approvals_answer_only_calls_that_wait(tmp_path: Path) -> None:
    """A forged id is 422; a replayed answer, once the turn went on, is 409: nothing runs."""
    app = create_app(
        model=deleting("Deleted."), tools=[delete, size], store=tmp_path, limits=LIMITS
    )
    async with http(app) as api:
        await api.post(INVOKE, json=START)
        before = stored(tmp_path, "c").to_dict()
        forged = await api.post(INVOKE, json={**RESUME, "approvals": {"c1": True, "c9": True}})
        answered = await api.post(INVOKE, json={**RESUME, "approvals": {"c0": True}})
        assert stored(tmp_path, "c").to_dict() == before
        assert deleted == []
        assert (await api.post(INVOKE, json=RESUME)).status_code == 200
        replayed = await api.post(INVOKE, json=RESUME)
        missing = await api.post(INVOKE, json={**RESUME, "chat_id": "none"})
    assert forged.status_code == 422
    assert forged.json()["error"]["code"] == "invalid_approvals"
    assert problems_of(forged) == ["approvals.c9"]
    assert (answered.status_code, problems_of(answered)) == (422, ["approvals.c0"])  # it ran
    assert replayed.status_code == 409
    assert replayed.json()["error"]["code"] == "nothing_to_resume"
    assert deleted == ["notes.txt"]  # once
    assert missing.status_code == 404  # resuming never creates a chat


async def test_a_posted_history_with_nothing_waiting_is_409() -> None:
    app = create_app(model=ScriptedClient(["Hi."]), tools=[delete])
    async with http(app) as api:
        first = (await api.post(INVOKE, json={"message": "Hi", "append_to_history": True})).json()
        body = {"history": first["history"], "approvals": {"c1": True}}
        answer = await api.post(INVOKE, json=body)
    assert first["status"] == "completed"
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "nothing_to_resume"


async def test_two_requests_answering_one_chat_at_once_run_the_call_once(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    paid: list[int] = []

    @tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pay an amount."""
        started.set()
        await release.wait()
        paid.append(amount)
        return "paid"

    call = LLMResponse(tool_calls=(ToolCall("c1", "pay", {"amount": 5}),))
    model = ScriptedClient([call, "Paid."])
    app = create_app(model=model, tools=[pay], store=tmp_path, limits=LIMITS)
    async with http(app) as api:
        await api.post(INVOKE, json={**START, "message": "Pay 5"})
        first = asyncio.create_task(api.post(INVOKE, json=RESUME))
        await asyncio.wait_for(started.wait(), 5)
        second = await asyncio.wait_for(api.post(INVOKE, json=RESUME), 5)
        release.set()
        answer = await first
        third = await api.post(INVOKE, json=RESUME)  # the chat no longer waits
    assert (second.status_code, second.json()["error"]["code"]) == (409, "nothing_to_resume")
    assert (answer.status_code, answer.json()["text"]) == (200, "Paid.")
    assert third.status_code == 409
    assert paid == [5]


# ---- a tool's own approver ---------------------------------------------------------------------


async def test_a_tools_own_approver_answers_on_the_server() -> None:
    asked: list[str] = []

    def ask(call: ToolCall) -> bool | str:
        asked.append(call.input["path"])
        return "not that file" if call.input["path"] == "keep.txt" else True

    guarded = tool(requires_approval=True, approver=ask)(delete.function)
    one = LLMResponse("", tool_calls=(ToolCall("c1", "delete", {"path": "notes.txt"}),))
    keep = LLMResponse("", tool_calls=(ToolCall("c2", "delete", {"path": "keep.txt"}),))
    model = ScriptedClient([one, LLMResponse("Deleted."), keep, LLMResponse("Kept.")])
    app = create_app(model=model, tools=[guarded])
    async with http(app) as client:
        first = await client.post(INVOKE, json={"message": "Delete notes.txt"})
        second = await client.post(INVOKE, json={"message": "Delete keep.txt"})
    assert (first.status_code, first.json()["text"]) == (200, "Deleted.")
    assert (second.status_code, second.json()["text"]) == (200, "Kept.")
    assert first.json()["status"] == "completed"
    assert asked == ["notes.txt", "keep.txt"]
    assert deleted == ["notes.txt"]
    declined = model.requests[3].messages[-1]
    assert declined.role == "tool"
    assert "not that file" in declined.content
