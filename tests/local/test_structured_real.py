"""Structured output from the embedded model (``pytest -m real_model``): llama.cpp's server
constrains the answer to the schema (``response_format`` with a ``json_schema``)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from glassagent import Agent, ModelSettings
from glassagent.events import CompleteEvent
from glassagent.local import LocalServer, ensure_default_model

pytestmark = pytest.mark.real_model


class Capital(BaseModel):
    country: str
    city: str


async def test_the_embedded_model_answers_with_a_valid_object() -> None:
    ensure_default_model()
    with LocalServer(context_size=2048) as server:
        async with server.client() as client:
            agent = Agent(
                client,
                output_type=Capital,
                settings=ModelSettings(temperature=0, max_tokens=64),
            )
            events = [event async for event in agent.run("What is the capital of France?")]
            request = next(e for e in events if e.type == "llm_request")
    complete = events[-1]
    assert isinstance(complete, CompleteEvent), events[-1]
    result = Capital.model_validate(complete.output)
    assert result.city.strip().lower() == "paris"
    assert request.settings.output_schema is not None  # the native mode was used
