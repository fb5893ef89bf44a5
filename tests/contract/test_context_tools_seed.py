# ruff: noqa: RUF001, RUF003  (the design's Japanese text is kept as written)
"""Context tools as the design document writes them (ai-tools-architecture.md).

The design's own example tool, ``MyNewTool``, is ported here as written (C# to Python,
``ExecuteAsync`` to an async ``run``): its definition with two parameters, its relevance
built on the message analysis, its arguments from function calling, its result with a
suggested role and debug info. Its two shipped tools, ``get_user_tasks`` and
``search_information``, are the runnable example ``examples/context_tools``; their trigger
conditions are checked here at the design's threshold.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent.errors import UserError
from glassagent.events import (
    ContextSelectionEvent,
    ContextToolCompleteEvent,
    Event,
    parse_event,
)
from glassagent.testing import ScriptedClient
from glassagent.tools import (
    ContextResult,
    ContextSettings,
    ContextTool,
    MessageAnalysis,
    TurnInfo,
    analyze_message,
    context_tool,
    to_anthropic_tools,
    to_openai_tools,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "context_tools"

# ---- the design's MyNewTool, as written ----------------------------------------------------

SECRETARY_ROLE = "secretary"  # RoleRandomizer.SecretaryRole

# GetDefinition(): Properties [query: string "検索クエリ", limit: integer], Required ["query"]
MY_NEW_TOOL_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "検索クエリ"},
        "limit": {"type": "integer", "description": "取得件数（デフォルト: 5）"},
    },
    "required": ["query"],
}


class MyService:
    """IMyService: GetDataAsync(query) gives the items on `query`, or None."""

    def __init__(self, data: dict[str, list[str]]) -> None:
        self.data = data
        self.queries: list[str] = []

    async def get_data_async(self, query: str) -> list[str] | None:
        self.queries.append(query)
        await asyncio.sleep(0)
        return self.data.get(query)


class MyNewTool(ContextTool):
    # ツール名（一意識別子）
    name = "my_new_tool"
    # ツールの説明（AI向け）
    description = "このツールは○○を取得します。ユーザーが「○○」と尋ねた時に使用します。"
    # 基本優先度（同スコア時のタイブレーカー、高いほど優先）
    priority = 80
    # Function Calling 用の定義
    parameters = MY_NEW_TOOL_PARAMETERS

    def __init__(self, my_service: MyService) -> None:
        self._my_service = my_service

    # 関連度スコアを計算（0-100）
    def relevance(self, query: str, ctx: TurnInfo[Any]) -> int:
        if ctx.analysis is None:
            return 0
        # 例: InformationSeekingScore をベースにスコアを計算
        base_score = ctx.analysis.information_seeking_score
        # 特定のトピックが含まれている場合はスコアを上げる
        if "○○" in query:
            return min(100, base_score + 20)
        return base_score

    # ツールを実行
    async def run(self, query: str, ctx: TurnInfo[Any]) -> ContextResult:
        # Function Calling からの引数を取得
        if "query" in ctx.arguments:
            query = str(ctx.arguments["query"])
        else:
            query = ctx.analysis.information_topic if ctx.analysis else None  # type: ignore[assignment]
        if query is None or not query.strip():
            return ContextResult()  # AiToolResult.Empty(Name)
        # サービスを呼び出してデータを取得
        result = await self._my_service.get_data_async(query)
        if result is None:
            return ContextResult()
        # コンテキストプロンプトを生成
        prompt = self._build_context_prompt(result)
        return ContextResult(
            prompt, suggested_role=SECRETARY_ROLE, debug_info=f"Found {len(result)} items"
        )

    @staticmethod
    def _build_context_prompt(result: list[str]) -> str:
        lines = ["【参考情報】○○に関する情報:"]
        lines += [f"- {item}" for item in result]
        return "\n".join(lines)


def analysis_of(**fields: Any) -> ContextSettings:
    """Settings whose analyser (the design's IMessageAnalyzer) always says `fields`."""
    return ContextSettings(analyzer=lambda query, ctx: MessageAnalysis(**fields))


def only(events: tuple[Event, ...], kind: type[Any]) -> Any:
    [event] = [e for e in events if isinstance(e, kind)]
    return event


def statuses(events: tuple[Event, ...]) -> dict[str, tuple[int, str]]:
    return {s.tool_name: (s.score, s.status) for s in only(events, ContextSelectionEvent).scores}


def test_the_definition_declares_the_designs_parameters_for_every_format() -> None:
    tool_ = MyNewTool(MyService({}))
    assert tool_.definition.parameters == MY_NEW_TOOL_PARAMETERS
    (openai,) = to_openai_tools([tool_])
    assert openai["function"]["name"] == "my_new_tool"
    assert openai["function"]["description"].startswith("このツールは○○を取得します。")
    assert openai["function"]["parameters"]["required"] == ["query"]
    (anthropic,) = to_anthropic_tools([tool_])
    assert set(anthropic["input_schema"]["properties"]) == {"query", "limit"}


async def test_relevance_reads_the_analysis_and_the_result_carries_role_and_debug_info() -> None:
    service = MyService({"○○の資料": ["資料A", "資料B"]})
    client = ScriptedClient(["ok"])
    settings = analysis_of(information_seeking_score=40, information_topic="○○の資料")
    agent = Agent(client, context_tools=[MyNewTool(service)], context_settings=settings)
    result = await agent.run("○○について教えて")
    assert statuses(result.events) == {"my_new_tool": (60, "selected")}  # 40 + 20 for ○○
    assert service.queries == ["○○の資料"]  # no function arguments: the analysed topic
    done = only(result.events, ContextToolCompleteEvent)
    assert (done.suggested_role, done.debug_info) == ("secretary", "Found 2 items")
    assert client.requests[0].messages[-1].content == (
        "<context>\n[my_new_tool]\n【参考情報】○○に関する情報:\n- 資料A\n- 資料B\n</context>"
        "\n\n○○について教えて"
    )


async def test_without_the_topic_word_the_base_score_stays_under_the_threshold() -> None:
    settings = analysis_of(information_seeking_score=40, information_topic="x")
    tools = [MyNewTool(MyService({}))]
    agent = Agent(ScriptedClient(["ok"]), context_tools=tools, context_settings=settings)
    result = await agent.run("tell me")
    assert statuses(result.events) == {"my_new_tool": (40, "below_threshold")}


async def test_without_an_analysis_the_tool_scores_zero() -> None:
    settings = ContextSettings(analyzer=None)
    tools = [MyNewTool(MyService({}))]
    agent = Agent(ScriptedClient(["ok"]), context_tools=tools, context_settings=settings)
    result = await agent.run("○○")
    assert statuses(result.events) == {"my_new_tool": (0, "below_threshold")}
    assert only(result.events, ContextSelectionEvent).analysis is None


async def test_an_empty_result_adds_nothing() -> None:
    settings = analysis_of(information_seeking_score=90)  # no topic, no arguments
    client = ScriptedClient(["ok"])
    agent = Agent(client, context_tools=[MyNewTool(MyService({}))], context_settings=settings)
    result = await agent.run("○○")
    done = only(result.events, ContextToolCompleteEvent)
    assert (done.output, done.is_error, done.suggested_role) == ("", False, None)
    assert client.requests[0].messages[-1].content == "○○"


async def test_the_model_calls_it_with_the_function_arguments() -> None:
    service = MyService({"請求書": ["2024年分", "2025年分"]})
    my_tool = MyNewTool(service)
    call = ToolCall("c1", "my_new_tool", {"query": "請求書", "limit": 2})
    bad = ToolCall("c2", "my_new_tool", {"limit": "two"})
    client = ScriptedClient([LLMResponse(tool_calls=(call, bad)), "done"])
    result = await Agent(client, [my_tool]).run("hello")
    good_reply, bad_reply = result.new_messages[2:4]
    assert good_reply.content == "【参考情報】○○に関する情報:\n- 2024年分\n- 2025年分"
    assert bad_reply.content.startswith("Error")
    assert "query" in bad_reply.content  # the schema's required argument is missing
    assert service.queries == ["請求書"]  # the invalid call never ran
    assert client.requests[0].tools[0].parameters == MY_NEW_TOOL_PARAMETERS


async def test_the_tool_sees_the_arguments_the_user_and_no_analysis_when_called() -> None:
    seen: list[TurnInfo[Any]] = []

    @context_tool(parameters={"type": "object", "properties": {"limit": {"type": "integer"}}})
    def tasks(query: str, ctx: TurnInfo) -> str:
        """Open tasks."""
        seen.append(ctx)
        return "none"

    call = ToolCall("c1", "tasks", {"limit": 3})
    client = ScriptedClient([LLMResponse(tool_calls=(call,)), "done"])
    await Agent(client, [tasks]).run("hi", host={"user_id": "alice"})
    (ctx,) = seen
    assert (ctx.call_id, ctx.user_id, dict(ctx.arguments), ctx.analysis) == (
        "c1",
        "alice",
        {"limit": 3},
        None,
    )
    with pytest.raises(TypeError):
        ctx.arguments["limit"] = 4  # type: ignore[index]


# ---- the context: user id, analysis, arguments ---------------------------------------------


async def test_the_context_holds_the_user_the_analysis_and_no_arguments() -> None:
    seen: list[TurnInfo[Any]] = []

    @context_tool
    def spy(query: str, ctx: TurnInfo) -> None:
        seen.append(ctx)

    agent = Agent(ScriptedClient(["a", "b"]), context_tools=[spy])
    await agent.run("What is the refund policy?", host={"user_id": "alice", "team": "blue"})
    await agent.run("again", host={"user_id": 42})
    first, second = seen
    assert first.user_id == "alice"
    assert first.analysis == analyze_message("What is the refund policy?")
    assert first.analysis is not None
    assert first.analysis.information_topic == "refund policy"
    assert dict(first.arguments) == {}
    assert second.user_id == "42"  # a host fact is read as text, as ToolContext reads them


async def test_without_a_host_user_the_user_id_is_none_for_both_contexts() -> None:
    seen: list[Any] = []

    @context_tool
    def spy(query: str, ctx: TurnInfo) -> None:
        seen.append(ctx.user_id)

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Say who the user is."""
        seen.append(ctx.user_id)
        return str(ctx.user_id)

    client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "whoami", {}),)), "ok"])
    agent = Agent(client, [whoami], context_tools=[spy])
    await agent.run("hi")
    await Agent(
        ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "whoami", {}),)), "ok"]),
        [whoami],
    ).run("hi", host={"user_id": "bob"})
    assert seen == [None, None, "bob"]


async def test_your_own_analyzer_may_be_async_and_sees_the_turn() -> None:
    calls: list[tuple[str, Any]] = []

    async def classify(query: str, ctx: TurnInfo) -> MessageAnalysis:
        calls.append((query, ctx.user_id))
        await asyncio.sleep(0)
        return MessageAnalysis(guidance_seeking_score=75)

    @context_tool(relevance=lambda query, ctx: ctx.analysis.guidance_seeking_score)
    def tasks(query: str, ctx: TurnInfo) -> str:
        return "- call Bob"

    settings = ContextSettings(analyzer=classify)
    agent = Agent(ScriptedClient(["ok"]), context_tools=[tasks], context_settings=settings)
    result = await agent.run("plan", host={"user_id": "alice"})
    assert calls == [("plan", "alice")]
    assert statuses(result.events) == {"tasks": (75, "selected")}
    assert only(result.events, ContextSelectionEvent).analysis == MessageAnalysis(
        guidance_seeking_score=75
    )


async def test_an_analyzer_that_fails_leaves_no_analysis_and_the_tools_still_run() -> None:
    def raises(query: str, ctx: TurnInfo) -> MessageAnalysis:
        raise RuntimeError("classifier down")

    async def hangs(query: str, ctx: TurnInfo) -> MessageAnalysis:
        await asyncio.Event().wait()
        return MessageAnalysis()

    def wrong(query: str, ctx: TurnInfo) -> Any:
        return {"information_seeking_score": 90}

    expected = {
        raises: "RuntimeError: classifier down",
        hangs: "the analyzer timed out after 0.05 s",
        wrong: "TypeError: the analyzer returned a dict, not a MessageAnalysis",
    }
    for analyzer, error in expected.items():
        settings = ContextSettings(analyzer=analyzer, timeout=0.05)
        client = ScriptedClient(["ok"])
        tools = [context_tool(name="kb", relevance=90)(lambda q, c: "Fact.")]
        result = await Agent(client, context_tools=tools, context_settings=settings).run("hi")
        selection = only(result.events, ContextSelectionEvent)
        assert (selection.analysis, selection.analysis_error) == (None, error)
        assert client.requests[0].messages[-1].content.startswith("<context>\n[kb]\nFact.")


async def test_a_timeout_error_raised_by_user_code_is_its_error_not_a_timeout() -> None:
    def slow_db(query: str, ctx: TurnInfo) -> Any:
        raise TimeoutError("db slow")

    settings = ContextSettings(analyzer=slow_db, timeout=None)  # no limit to report
    tools = [context_tool(name="kb", relevance=slow_db)(lambda q, c: "")]
    agent = Agent(ScriptedClient(["ok"]), context_tools=tools, context_settings=settings)
    result = await agent.run("hi")
    selection = only(result.events, ContextSelectionEvent)
    assert selection.analysis_error == "TimeoutError: db slow"
    assert selection.scores[0].error == "TimeoutError: db slow"
    assert result.text == "ok"


# ---- events ------------------------------------------------------------------------------


async def test_the_new_event_fields_round_trip_and_old_dicts_still_parse() -> None:
    service = MyService({"t": ["one"]})
    settings = analysis_of(information_seeking_score=80, information_topic="t")
    tools = [MyNewTool(service)]
    agent = Agent(ScriptedClient(["ok"]), context_tools=tools, context_settings=settings)
    result = await agent.run("hi")
    selection = only(result.events, ContextSelectionEvent)
    done = only(result.events, ContextToolCompleteEvent)
    for event in (selection, done):
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event
    assert selection.to_dict()["analysis"] == {
        "information_seeking_score": 80,
        "guidance_seeking_score": 0,
        "information_topic": "t",
    }
    old_selection = {k: v for k, v in selection.to_dict().items() if "analysis" not in k}
    old_done = {
        k: v for k, v in done.to_dict().items() if k not in ("suggested_role", "debug_info")
    }
    parsed = parse_event(old_selection)
    assert isinstance(parsed, ContextSelectionEvent)
    assert (parsed.analysis, parsed.analysis_error) == (None, None)
    parsed_done = parse_event(old_done)
    assert isinstance(parsed_done, ContextToolCompleteEvent)
    assert (parsed_done.suggested_role, parsed_done.debug_info) == (None, None)


async def test_an_analysis_subclass_with_more_fields_still_parses() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Mood(MessageAnalysis):
        mood: str = "neutral"

    settings = ContextSettings(analyzer=lambda q, c: Mood(information_seeking_score=10, mood="up"))
    tools = [context_tool(name="kb", relevance=0)(lambda q, c: "")]
    agent = Agent(ScriptedClient(["ok"]), context_tools=tools, context_settings=settings)
    result = await agent.run("hi")
    data = only(result.events, ContextSelectionEvent).to_dict()
    assert data["analysis"]["mood"] == "up"
    parsed = parse_event(json.loads(json.dumps(data)))
    assert isinstance(parsed, ContextSelectionEvent)
    assert parsed.analysis == MessageAnalysis(information_seeking_score=10)


# ---- the default analyser ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "information", "guidance", "topic"),
    [
        ("What is the refund policy?", 100, 0, "refund policy"),
        ("Tell me about the Q3 budget.", 60, 0, "Q3 budget"),
        ("search for onboarding docs", 100, 0, "onboarding docs"),
        ("How do I reset my password?", 100, 0, "reset my password"),
        ("What should I do next?", 40, 100, None),
        ("Which task first?", 40, 80, None),
        ("Hello!", 0, 0, None),
        ("経費精算について教えて", 100, 0, "経費精算"),
        ("経費精算の締め切りはいつ？", 80, 0, "経費精算の締め切り"),
        ("次に何をすればいい？", 40, 100, None),
        ("今日のタスクは？", 20, 80, None),
    ],
)
def test_the_default_analyser_reads_english_and_japanese_cues(
    message: str, information: int, guidance: int, topic: str | None
) -> None:
    assert analyze_message(message) == MessageAnalysis(information, guidance, topic)


# ---- checks --------------------------------------------------------------------------------


def test_bad_values_are_refused() -> None:
    with pytest.raises(UserError, match="0 to 100"):
        MessageAnalysis(information_seeking_score=101)
    with pytest.raises(UserError, match="0 to 100"):
        MessageAnalysis(guidance_seeking_score=True)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="information_topic"):
        MessageAnalysis(information_topic=3)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="text"):
        ContextResult(None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="suggested_role"):
        ContextResult("x", suggested_role=1)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="analyzer"):
        ContextSettings(analyzer=42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="object"):
        context_tool(name="x", parameters={"type": "string"})(lambda q, c: "")
    with pytest.raises(UserError, match="invalid JSON Schema"):
        context_tool(name="x", parameters={"type": "object", "properties": 3})(lambda q, c: "")


# ---- the seed's two tools: examples/context_tools ------------------------------------------


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_tools", EXAMPLE / "seed_tools.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed_tools"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["seed_tools"]
    return module


@pytest.mark.parametrize(
    ("information", "guidance", "topic", "ran"),
    [
        (0, 50, None, {"get_user_tasks"}),  # GuidanceSeekingScore >= 50
        (0, 49, None, set()),
        (50, 0, "travel", {"search_information"}),  # InformationSeekingScore >= 50 and a topic
        (49, 0, "travel", set()),
        (100, 0, None, set()),  # no topic
        (80, 70, "travel", {"get_user_tasks", "search_information"}),
    ],
)
async def test_the_seed_tools_run_on_their_trigger_conditions(
    information: int, guidance: int, topic: str | None, ran: set[str]
) -> None:
    example = load_example()
    tools = [example.GetUserTasksTool(), example.SearchInformationTool()]
    settings = analysis_of(
        information_seeking_score=information,
        guidance_seeking_score=guidance,
        information_topic=topic,
    )
    client = ScriptedClient(["ok"])
    agent = Agent(client, context_tools=tools, context_settings=settings)
    result = await agent.run("hi", deps=example.sample_services(), host={"user_id": "alice"})
    done = [e for e in result.events if isinstance(e, ContextToolCompleteEvent)]
    assert {e.tool_name for e in done} == ran
    assert all(e.suggested_role == "secretary" and not e.is_error for e in done)
    if len(ran) == 2:  # merged in rank order, "---" between them
        sent = client.requests[0].messages[-1].content
        assert sent.index("[search_information]") < sent.index("\n---\n[get_user_tasks]")


async def test_get_user_tasks_without_a_user_gives_nothing_and_says_why() -> None:
    example = load_example()
    settings = analysis_of(guidance_seeking_score=90)
    client = ScriptedClient(["ok"])
    agent = Agent(client, context_tools=[example.GetUserTasksTool()], context_settings=settings)
    result = await agent.run("next?", deps=example.sample_services())
    done = only(result.events, ContextToolCompleteEvent)
    assert (done.output, done.suggested_role) == ("", None)
    assert done.debug_info.startswith("no user id")
    assert client.requests[0].messages[-1].content == "next?"


def test_the_example_runs_without_a_key_or_a_server(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "main.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for expected in [
        "> What should I do next?",
        "  get_user_tasks: 100 -> selected",
        "  get_user_tasks gave 120 characters (role 'secretary', debug 'Found 2 tasks')",
        "    | - Send the Q3 report to Bob (due 2025-10-03)",
        "  analysis: information 60, guidance 0, topic 'travel policy'",
        "  search_information: 60 -> selected",
        "    | - Travel policy: Book travel through the portal; economy under 6 h.",
        "> the model called search_information("
        + json.dumps({"query": "expense receipts", "limit": 1})
        + "):",
        "    | - Expense policy: Submit receipts within 30 days of the travel.",
        "  anthropic: ['get_user_tasks', 'search_information']",
    ]:
        assert expected in lines, f"{expected!r} not in:\n{done.stdout}"
    hello = lines.index("> Hello!")
    assert lines[hello + 1 : hello + 6] == [
        "  analysis: information 0, guidance 0, topic None",
        "  get_user_tasks: 0 -> below_threshold",
        "  search_information: 0 -> below_threshold",
        "  the model received:",
        "    | Hello!",
    ]
