"""Helpers shared by the server tests: an httpx client on the ASGI app, SSE, histories."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from glassagent import LLMResponse, Message
from glassagent.history import History
from glassagent.testing import FunctionClient

INVOKE = "/api/ai/invoke"


@asynccontextmanager
async def http(app: Any, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to `app` in-process, with a bearer token if given."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver", headers=headers
    ) as client:
        yield client


def sse_events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body; every non-empty line must be one ``data:`` line."""
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        events.append(json.loads(block[len("data: ") :]))
    return events


def document(*turns: tuple[str, str], version: str = "2.0") -> dict[str, Any]:
    """A standard history holding one chain of (role, text) messages."""
    history = History(title="posted")
    for role, text in turns:
        history.append(Message(role=role, content=text))  # type: ignore[arg-type]
    return history.to_dict(version)  # type: ignore[arg-type]


def echo_client(**kwargs: Any) -> FunctionClient:
    """A model answering ``seen: <every message's text, joined by |>``."""

    def answer(messages: Sequence[Message], *_: Any) -> str:
        return "seen: " + "|".join(m.content for m in messages)

    return FunctionClient(answer, model="echo", **kwargs)


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


def answer_with(response: LLMResponse | str) -> FunctionClient:
    return FunctionClient(lambda *_: response, model="fixed")
