"""Checked by mypy --strict (test_structured_output.py): runs are typed by `output_type`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict, assert_type

from glassagent import Agent, RunResult
from glassagent.agent import AgentRun
from glassagent.errors import OutputValidationError
from glassagent.otel import traced
from glassagent.testing import ReplayClient, ScriptedClient


class City(BaseModel):
    name: str


@dataclass
class Point:
    x: int


class Pair(TypedDict):
    left: str


async def typed_runs() -> None:
    client = ScriptedClient([])
    plain = Agent(client)
    assert_type(plain, Agent[Any, str])
    assert_type((await plain.run("?")).output, str)
    city = Agent(client, output_type=City)
    assert_type(city.run("?"), AgentRun[City])
    assert_type(await city.run("?"), RunResult[City])
    assert_type((await city.run("?")).output, City)
    assert_type(city.run_sync("?").output, City)
    assert_type((await Agent(client, output_type=Point).run("?")).output, Point)
    assert_type((await Agent(client, output_type=Pair).run("?")).output, Pair)
    assert_type((await Agent(client, output_type=list[str]).run("?")).output, list[str])
    result = await city.resume(await city.run("?"))
    assert_type(result.output, City)
    assert_type((await traced(city.run("?"))).output, City)
    assert_type(traced(city.run("?")).run_sync().output, City)
    ReplayClient([]).check(result, await plain.run("?"))
    try:
        await city.run("?")
    except OutputValidationError as exc:
        assert_type(exc.errors, tuple[str, ...])
        if exc.result is not None:
            print(exc.result.output)
