"""The invoke server shows prompt caching: ``cache_hit_rate`` in its JSON, and the web page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources
from typing import Any

import pytest

from glassagent import LLMResponse, Usage
from glassagent.server import create_app
from glassagent.testing import FunctionClient
from tests.support.server import INVOKE, http


def cached_answer(*_: Any) -> LLMResponse:
    return LLMResponse(text="Noon.", usage=Usage(2000, 10, cache_read_tokens=1500))


async def test_the_result_json_carries_the_cache_hit_rate_when_the_cache_served() -> None:
    client = FunctionClient(cached_answer, model="cached")
    async with http(create_app(model=client)) as api:
        body = (await api.post(INVOKE, json={"message": "High tide?"})).json()
    assert body["usage"]["cache_read_tokens"] == 1500
    assert body["cache_hit_rate"] == 0.75
    names = ["text", "status", "stop_reason", "usage", "cache_hit_rate", "cost", "iterations"]
    assert list(body) == names


async def test_no_cache_hit_rate_without_cache_reads() -> None:
    client = FunctionClient(lambda *_: LLMResponse(text="ok", usage=Usage(20, 2)), model="plain")
    async with http(create_app(model=client)) as api:
        body = (await api.post(INVOKE, json={"message": "hi"})).json()
    assert "cache_hit_rate" not in body
    assert body["usage"]["cache_read_tokens"] == 0


def _format_usage() -> str:
    script = resources.files("glassagent._server").joinpath("static/app.js").read_text("utf-8")
    match = re.search(r"\n  function formatUsage\(usage\) \{\n.*?\n  \}\n", script, re.S)
    assert match is not None, "app.js has no formatUsage"
    return match.group(0)


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        (
            {"input_tokens": 2000, "output_tokens": 10, "cache_read_tokens": 1500},
            "2000 in / 10 out tokens, 1500 cached (75% cache hits)",
        ),
        ({"input_tokens": 20, "output_tokens": 2, "cache_read_tokens": 0}, "20 in / 2 out tokens"),
    ],
)
def test_the_page_shows_cached_tokens_and_the_hit_rate(usage: dict[str, int], shown: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    program = f"{_format_usage()}\nprocess.stdout.write(formatUsage({json.dumps(usage)}));\n"
    done = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
