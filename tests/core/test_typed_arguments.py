"""Public calls given an argument of the wrong type raise glassagent's typed errors.

Before, they raised built-in exceptions (``TypeError``, ``AttributeError``,
``FileExistsError``...) from deep inside, or took nonsense silently. A user id a database
cannot hold is refused up front, the same on every kind of chat store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent
from glassagent.errors import ConfigurationError, UserError
from glassagent.history import (
    ChatStore,
    History,
    HistoryLimits,
    HistoryStore,
    SQLHistoryStore,
)
from glassagent.llm import (
    Message,
    ModelSettings,
    ToolCall,
    create_llm_client,
    register_provider,
)
from glassagent.testing import ScriptedClient
from tests.support.store import Place, chat, contents


def agent() -> Agent[Any, Any]:
    return Agent(ScriptedClient(["hello"]))


def awaiting() -> History:
    """A history whose last answer asks for a tool call (so `resume` has one to continue)."""
    history = History()
    history.append(Message(role="user", content="go"))
    history.append(Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),)))
    return history


Call = Callable[[Path], object]


def bad(value: object) -> Any:
    """`value`, typed so that a wrongly typed argument needs no ``type: ignore``."""
    return value


def new_agent(**options: Any) -> Agent[Any, Any]:
    return Agent(ScriptedClient([]), **options)


def store_at(tmp: Path, **options: Any) -> SQLHistoryStore:
    return SQLHistoryStore(f"sqlite+aiosqlite:///{tmp}/c.db", **options)


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "chats"
    path.write_text("not a directory")
    return path


# (the call's id, the call, a word its message must hold)
AGENT_CALLS: list[tuple[str, Call, str]] = [
    ("Agent(max_iterations='3')", lambda _: new_agent(max_iterations="3"), "max_iterations"),
    ("Agent(max_iterations=2.5)", lambda _: new_agent(max_iterations=2.5), "max_iterations"),
    ("Agent(max_iterations=True)", lambda _: new_agent(max_iterations=True), "max_iterations"),
    ("Agent(tool_timeout='5')", lambda _: new_agent(tool_timeout="5"), "tool_timeout"),
    ("Agent(run_timeout='5')", lambda _: new_agent(run_timeout="5"), "run_timeout"),
    ("Agent(run_timeout=True)", lambda _: new_agent(run_timeout=True), "run_timeout"),
    ("Agent(system=5)", lambda _: new_agent(system=5), "system"),
    ("Agent(settings={})", lambda _: new_agent(settings={}), "settings"),
    ("Agent(tools=5)", lambda _: new_agent(tools=5), "tools"),
    ("Agent(context_tools=5)", lambda _: new_agent(context_tools=5), "context_tools"),
    ("Agent(context_settings=5)", lambda _: new_agent(context_settings=5), "context_settings"),
    ("run(None)", lambda _: agent().run(bad(None)), "prompt"),
    ("run(5)", lambda _: agent().run(bad(5)), "prompt"),
    ("run_sync(None)", lambda _: agent().run_sync(bad(None)), "prompt"),
    ("run(history='x')", lambda _: agent().run("q", history=bad("x")), "history"),
    ("run(messages=[1])", lambda _: agent().run("q", messages=bad([1])), "messages"),
    ("run(messages='ab')", lambda _: agent().run("q", messages=bad("ab")), "messages"),
    ("run(settings={})", lambda _: agent().run("q", settings=bad({})), "settings"),
    ("run(attachments=5)", lambda _: agent().run("q", attachments=bad(5)), "attachments"),
    ("run(attachments='a.png')", lambda _: agent().run("q", attachments="a.png"), "attachments"),
    ("run(attachments=[5])", lambda _: agent().run("q", attachments=bad([5])), "attachments"),
    ("resume(5)", lambda _: agent().resume(bad(5)), "previous"),
    ("resume([1])", lambda _: agent().resume(bad([1])), "previous"),
    ("resume(settings={})", lambda _: agent().resume(awaiting(), settings=bad({})), "settings"),
]

FACTORY_CALLS: list[tuple[str, Call, str]] = [
    ("create_llm_client(5)", lambda _: create_llm_client(bad(5)), "provider name"),
    (
        "create_llm_client(api_key=5)",
        lambda _: create_llm_client("openai", api_key=bad(5)),
        "api_key",
    ),
    ("create_llm_client(model=5)", lambda _: create_llm_client("openai", model=bad(5)), "model"),
    ("register_provider(5)", lambda _: register_provider(bad(5), ScriptedClient), "provider name"),
]

STORE_CALLS: list[tuple[str, Call, str]] = [
    ("HistoryStore(a file)", lambda tmp: HistoryStore(_a_file(tmp)), "not a directory"),
    ("HistoryStore(under a file)", lambda tmp: HistoryStore(_a_file(tmp) / "x"), "store directory"),
    ("HistoryStore(5)", lambda _: HistoryStore(bad(5)), "directory path"),
    ("HistoryStore(limits=5)", lambda tmp: HistoryStore(tmp, limits=bad(5)), "limits"),
    (
        "HistoryStore(attachment_policy='safe')",
        lambda tmp: HistoryStore(tmp, attachment_policy=bad("safe")),
        "attachment_policy",
    ),
    ("SQLHistoryStore(limits=5)", lambda tmp: store_at(tmp, limits=5), "limits"),
    ("SQLHistoryStore(user='a\\0')", lambda tmp: store_at(tmp, user="a\0"), "user id"),
    ("SQLHistoryStore(user=5)", lambda tmp: store_at(tmp, user=5), "user id"),
    ("HistoryLimits(max_messages=-1)", lambda _: HistoryLimits(max_messages=-1), "max_messages"),
    (
        "HistoryLimits(max_messages='5')",
        lambda _: HistoryLimits(max_messages=bad("5")),
        "max_messages",
    ),
    ("HistoryLimits(max_nesting=0)", lambda _: HistoryLimits(max_nesting=0), "max_nesting"),
    ("HistoryLimits(max_depth=True)", lambda _: HistoryLimits(max_depth=True), "max_depth"),
    (
        "HistoryLimits(max_total_bytes=1.5)",
        lambda _: HistoryLimits(max_total_bytes=bad(1.5)),
        "max_total_bytes",
    ),
]

MESSAGE_CALLS: list[tuple[str, Call, str]] = [
    ("Message(role='bogus')", lambda _: Message(role=bad("bogus")), "role"),
    ("Message(role=5)", lambda _: Message(role=bad(5)), "role"),
    ("Message(role=['user'])", lambda _: Message(role=bad(["user"])), "role"),
    ("Message(content=5)", lambda _: Message(role="user", content=bad(5)), "content"),
    ("Message(content=None)", lambda _: Message(role="user", content=bad(None)), "content"),
    ("Message(status='done')", lambda _: Message(role="user", status=bad("done")), "status"),
    ("ToolCall(input=[1])", lambda _: ToolCall("c1", "add", bad([1])), "input"),
    ("ToolCall(input=None)", lambda _: ToolCall("c1", "add", bad(None)), "input"),
    ("ModelSettings(timeout='5')", lambda _: ModelSettings(timeout=bad("5")), "timeout"),
    (
        "ModelSettings(stall_timeout=True)",
        lambda _: ModelSettings(stall_timeout=True),
        "stall_timeout",
    ),
    (
        "ModelSettings(max_response_bytes='1')",
        lambda _: ModelSettings(max_response_bytes=bad("1")),
        "max_response_bytes",
    ),
    ("ModelSettings(retry=5)", lambda _: ModelSettings(retry=bad(5)), "retry"),
]


def _cases(calls: list[tuple[str, Call, str]]) -> list[Any]:
    return [pytest.param(call, word, id=name) for name, call, word in calls]


@pytest.mark.parametrize(("call", "word"), _cases(AGENT_CALLS + STORE_CALLS + MESSAGE_CALLS))
def test_a_wrongly_typed_argument_is_a_user_error(call: Call, word: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=word):
        call(tmp_path)


@pytest.mark.parametrize(("call", "word"), _cases(FACTORY_CALLS))
def test_a_wrongly_typed_provider_argument_is_a_configuration_error(
    call: Call, word: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=word):
        call(tmp_path)


async def test_arguments_of_the_right_types_still_work(tmp_path: Path) -> None:
    client = ScriptedClient(["one", "two", "three"])
    bot = Agent(client, [], system="Be brief.", max_iterations=3, run_timeout=30, tool_timeout=1.5)
    first = await bot.run("hi", settings=ModelSettings(timeout=60, max_response_bytes=1 << 20))
    second = await bot.run("again", messages=tuple(first.all_messages))  # any sequence
    third = await bot.run("more", messages=(m for m in second.all_messages))  # any iterable
    assert [first.output, second.output, third.output] == ["one", "two", "three"]
    assert len(third.all_messages) == 6
    store = HistoryStore(tmp_path / "new" / "chats", limits=HistoryLimits(max_messages=10))
    assert store.list() == []
    assert Message(role="tool", content="", status="aborted").status == "aborted"


# ---- user ids, on every kind of chat store ------------------------------------------------

BAD_USER_IDS = ["u\x00", "line\nbreak", "tab\there", "\x1b[31mred", "del\x7f", "nel\x85", "\ud800"]


@pytest.mark.parametrize("user", BAD_USER_IDS)
async def test_a_user_id_no_store_can_hold_is_refused_up_front(place: Place, user: str) -> None:
    async def use(store: ChatStore) -> None:
        view = store.for_user(user)  # before: PostgreSQL raised DBAPIError on the first use
        await view.asave("c", chat("hi"))
        await view.alist()

    root = await place.open()
    with pytest.raises(UserError, match="Invalid user id"):
        await use(root)
    assert await root.alist() == []


async def test_a_user_id_with_no_control_character_works_everywhere(place: Place) -> None:
    root = await place.open()
    for user in ("", "alice@example.com", "Zoë 👩‍💻 (admin)", "a/../b", "x" * 500):
        view = root.for_user(user)
        await view.asave("c", chat(f"by {user[:10]}"))
        loaded = await view.aload("c")
        assert loaded is not None
        assert contents(loaded) == [f"by {user[:10]}"]


def test_a_store_refuses_a_non_string_user_id(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    with pytest.raises(UserError, match="user id must be a string"):
        store.for_user(5)  # type: ignore[arg-type]
