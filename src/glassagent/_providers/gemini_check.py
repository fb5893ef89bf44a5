"""Gemini exchanges, sent by the fast route and by google-genai's public route, compared.

The fast route (`gemini_sdk`) rests on google-genai internals: its request converter, its
response converter, its response check and its continuation hops, and on our own copy of how
google-genai writes ``contents`` (`gemini_wire.rest_content`). Before a process takes it,
`differences` sends each case both ways, through a scripted transport that answers with the
case's bodies (written as Gemini answers; nothing leaves the process), and compares what was
sent (URL and JSON body of every request) and what google-genai gave back (every field of
every response or streamed chunk). The cases cover what a client sends and reads: every kind
of message and part (text, inline data, file URIs, thought signatures, function calls and
results), a system instruction, tool declarations and tool choice, sampling settings,
thinking by budget and by level, safety settings, a JSON answer schema, thought and signed
parts, function calls, inline data and citations in an answer, finish reasons, a blocked
prompt, usage, and continuation hops.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
from google import genai
from google.genai import types

from glassagent._core.messages import (
    Attachment,
    Message,
    ModelSettings,
    ToolCall,
    ToolDefinition,
)
from glassagent._core.output import OutputSchema
from glassagent._core.request import ModelRequest
from glassagent._providers import gemini_wire as wire
from glassagent._providers.gemini_options import GeminiOptions

FastCall = Callable[[Any, str, list[dict[str, Any]], dict[str, Any], bool], Awaitable[Any]]
"""Sends a request by the fast route: (google-genai client, model, REST contents, config,
streamed); returns the response, or the iterator of a stream's chunks."""
Send = Callable[[Any, str, Sequence[Message], dict[str, Any], bool], Awaitable[Any]]

_rest_content = wire.rest_content
"""The REST form of a message, as the client makes it (held here: the check's conversions
are its own, not counted or cached with a client's)."""

MODEL = "gemini-check"
BASE_URL = "https://gemini-check.invalid/"
_KEY = "AIzaGlassagentSelfCheck0000000000000"
_SIG_1 = base64.b64encode(b"\x0a\x24\x01\xfb\xff signature one").decode()
_SIG_2 = base64.b64encode(b"\x0a\x24\x02\xfe\xef signature two").decode()
_USAGE = {
    "promptTokenCount": 41,
    "candidatesTokenCount": 9,
    "thoughtsTokenCount": 5,
    "cachedContentTokenCount": 8,
    "totalTokenCount": 55,
    "promptTokensDetails": [
        {"modality": "TEXT", "tokenCount": 33},
        {"modality": "IMAGE", "tokenCount": 8},
    ],
}
_ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
_ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["city", "count"],
}


def _candidate(parts: list[dict[str, Any]], finish: str | None = "STOP", **more: Any) -> Any:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {**candidate, **more}


def _body(*candidates: Any, usage: bool = True, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"candidates": list(candidates)}
    if usage:
        body["usageMetadata"] = _USAGE
    return {**body, "modelVersion": "gemini-2.5-flash-001", "responseId": "check-1", **more}


@dataclass(frozen=True)
class Case:
    """One recorded exchange: a request as a client makes it, and Gemini's answers."""

    name: str
    messages: tuple[Message, ...]
    replies: tuple[dict[str, Any], ...]
    """``generateContent`` bodies, one per request (more than one: continuation hops)."""
    chunks: tuple[tuple[dict[str, Any], ...], ...] | None = None
    """``streamGenerateContent`` chunks, per request; by default each reply as one chunk."""
    tools: tuple[ToolDefinition, ...] = ()
    system: str | None = None
    settings: ModelSettings | None = None

    def config(self) -> dict[str, Any]:
        """The config a client sends for this case (`gemini_wire.to_config`)."""
        request = ModelRequest.build(self.messages, self.tools, self.system, self.settings)
        return wire.to_config(request, wire.system_texts(self.messages))

    def answers(self, streamed: bool) -> tuple[tuple[dict[str, Any], ...], ...]:
        """Per request, the bodies of its answer (a stream's chunks)."""
        if streamed and self.chunks is not None:
            return self.chunks
        return tuple((reply,) for reply in self.replies)


def _conversation() -> tuple[Message, ...]:
    """Every kind of message and part a client sends."""
    signed = {wire.SIGNATURE: _SIG_1}
    return (
        Message(role="system", content="Answer briefly."),
        Message(
            role="user",
            content="Add these, and look at the pictures.",
            attachments=(
                Attachment(data=b"\x89PNG fake \xfb\xff", mime_type="image/png"),
                Attachment.from_url("https://example.com/report.pdf"),
            ),
        ),
        Message(
            role="assistant",
            content="Adding.",
            provider_metadata=signed,
            tool_calls=(
                ToolCall("call-1", "add", {"a": 1, "b": [2, {"c": None}]}, signed),
                ToolCall("gen-2", "add", {"a": 3, "b": 4}, {"generated_id": True}),
            ),
        ),
        Message(role="tool", content="3", tool_call_id="call-1", name="add"),
        Message(role="tool", content="bad b", tool_call_id="gen-2", name="add", is_error=True),
        Message(role="tool", content="orphan", tool_call_id="nobody", name="lost"),
        Message(role="user", content="And?"),
    )


def _cases() -> tuple[Case, ...]:
    thought = {"text": "Adding them up.", "thought": True, "thoughtSignature": _SIG_2}
    call = {"functionCall": {"id": "fc-9", "name": "add", "args": {"a": 5, "b": 6}}}
    rating = {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    citation = {"citations": [{"startIndex": 0, "endIndex": 4, "uri": "https://example.com/"}]}
    options = GeminiOptions(
        top_p=0.9,
        top_k=5,
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        safety_settings=({"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"},),
        extra_config={"candidate_count": 1, "response_logprobs": False},
    )
    tools_settings = ModelSettings(
        temperature=0.2,
        max_tokens=300,
        stop_sequences=("END",),
        thinking_budget=256,
        tool_choice="add",
        provider_options=options,
    )
    structured = ModelSettings(
        output_schema=OutputSchema(name="place", schema=_ANSWER_SCHEMA),
        provider_options=GeminiOptions(thinking_level="low"),
    )
    hello = (Message(role="user", content="Hello."),)
    return (
        Case(
            "every part, tools and settings",
            _conversation(),
            (_body(_candidate([thought, {"text": "ok", "thoughtSignature": _SIG_1}, call])),),
            chunks=(
                (
                    _body(_candidate([thought], finish=None), usage=False),
                    _body(_candidate([{"text": "ok", "thoughtSignature": _SIG_1}], None)),
                    _body(_candidate([call], safetyRatings=[rating])),
                ),
            ),
            tools=(_ADD,),
            system="Be kind.",
            settings=tools_settings,
        ),
        Case(
            "a JSON answer by schema",
            hello,
            (_body(_candidate([{"text": '{"city": "Oslo", "count": 2}'}])),),
            system="Answer in JSON.",
            settings=structured,
        ),
        Case(
            "finish reasons, inline data and citations",
            hello,
            (
                _body(
                    _candidate(
                        [{"text": "Look"}, image],
                        "MAX_TOKENS",
                        safetyRatings=[rating],
                        citationMetadata=citation,
                    )
                ),
            ),
            tools=(_ADD,),
        ),
        Case(
            "a blocked prompt",
            hello,
            ({"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [rating]}},),
        ),
        Case(
            "continuation hops",
            hello,
            (
                _body(_candidate([{"text": "Hello "}], "CONTINUATION", continuationToken="dG9r")),
                _body(_candidate([{"text": "world"}])),
            ),
        ),
    )


class _Gemini:
    """A scripted Gemini API for an ``httpx.MockTransport``: answers, and keeps requests."""

    def __init__(self) -> None:
        self.answers: tuple[tuple[dict[str, Any], ...], ...] = ()
        self.streamed = False
        self.sent: list[tuple[str, Any]] = []

    def script(self, case: Case, streamed: bool) -> None:
        self.answers = case.answers(streamed)
        self.streamed = streamed
        self.sent = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((str(request.url), json.loads(request.content)))
        chunks = self.answers[min(len(self.sent), len(self.answers)) - 1]
        if self.streamed:
            events = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, content=events, headers=headers)
        return httpx.Response(200, json=chunks[0])


async def _fast(
    fast: FastCall,
    sdk: Any,
    model: str,
    messages: Sequence[Message],
    config: dict[str, Any],
    streamed: bool,
) -> Any:
    """Sends a request by the fast route, its contents in REST form as the client makes it."""
    contents = wire._assemble(messages, _rest_content)
    return await fast(sdk, model, contents, config, streamed)


async def _public(
    sdk: Any, model: str, messages: Sequence[Message], config: dict[str, Any], streamed: bool
) -> Any:
    """Sends a request by google-genai's public ``generate_content``, as `GeminiClient` does."""
    request = {"model": model, "contents": wire.to_contents(messages)[0], "config": config}
    if streamed:
        return await sdk.aio.models.generate_content_stream(**request)
    return await sdk.aio.models.generate_content(**request)


async def _outcome(call: Send, sdk: Any, case: Case, streamed: bool) -> Any:
    """What google-genai gave back for `case` sent by `call`: dumped responses, or the error."""
    try:
        answer = await call(sdk, MODEL, case.messages, case.config(), streamed)
        if not streamed:
            return answer.model_dump()
        return [chunk.model_dump() async for chunk in answer]
    except Exception as exc:  # compared too: both routes must fail alike
        return f"{type(exc).__name__}: {exc}"


async def differences(fast: FastCall) -> list[str]:
    """The cases (and modes) where `fast` sends or reads otherwise than the public route.

    Each recorded case is sent with ``generateContent`` and with ``streamGenerateContent``,
    by `fast` and by google-genai's public ``generate_content``; an empty list means both
    routes sent the same requests and gave back the same responses every time.
    """
    gemini = _Gemini()
    found: list[str] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(gemini)) as http:
        options = types.HttpOptions(httpx_async_client=http, base_url=BASE_URL)
        sdk = genai.Client(vertexai=False, api_key=_KEY, http_options=options)
        for case in _cases():
            for streamed in (False, True):
                runs = []
                for call in (partial(_fast, fast), _public):
                    gemini.script(case, streamed)
                    answer = await _outcome(call, sdk, case, streamed)
                    runs.append((gemini.sent, answer))
                if runs[0] != runs[1]:
                    what = "streamGenerateContent" if streamed else "generateContent"
                    found.append(f"{case.name} ({what}): {_first_difference(*runs)}")
    return found


def _first_difference(fast: Any, public: Any) -> str:
    """Where the fast route's requests and answers first part from the public route's."""
    for label, mine, theirs in (("requests", fast[0], public[0]), ("answer", fast[1], public[1])):
        if mine != theirs:
            return f"the {label} differ: {str(mine)[:300]} != {str(theirs)[:300]}"
    return "they differ"
