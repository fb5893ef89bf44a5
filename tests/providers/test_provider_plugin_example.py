"""The example provider plugin, examples/provider_plugin (OpenAI's Responses API).

Its own tests run here as its developer runs them (its own pytest configuration, in a
process of their own), and its wheel, built from its pyproject.toml and unpacked as an
installer would, is found by `create_llm_client` through its entry point.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent.llm import Message, ProviderOptions, create_llm_client
from tests.providers.contract_suite import KEY, Reply, WireServer
from tests.support.docs import fenced_blocks

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "provider_plugin"


@pytest.mark.slow
def test_the_plugin_passes_its_own_tests_and_the_contract_suite() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        command, cwd=PLUGIN, env=environment, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in [\d.]+s", summary), summary  # none skipped


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin's wheel, built by hatchling and unpacked into a directory on sys.path."""
    builder = pytest.importorskip("hatchling.builders.wheel")
    (wheel,) = builder.WheelBuilder(str(PLUGIN)).build(
        directory=str(tmp_path / "dist"), versions=["standard"]
    )
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as unpacked:
        unpacked.extractall(site)
    for name in [m for m in sys.modules if m.split(".")[0] == "glassagent_responses"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(site))
    # the plugin's options class registers its kind; the registry is restored afterwards
    monkeypatch.setattr(ProviderOptions, "_classes", dict(ProviderOptions._classes))
    yield site
    for name in [m for m in sys.modules if m.split(".")[0] == "glassagent_responses"]:
        del sys.modules[name]


async def test_the_plugin_is_found_by_its_entry_point(installed: Path) -> None:
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="glassagent.providers")
        if e.name == "openai_responses"
    ]
    assert entry.value == "glassagent_responses:ResponsesClient"
    assert "glassagent_responses" not in sys.modules  # imported only when asked for
    text = {"type": "output_text", "text": "Hello from a plugin."}
    answer = {"status": "completed", "output": [{"type": "message", "content": [text]}]}
    async with WireServer(Reply(body=[json.dumps(answer).encode()])) as server:
        client = create_llm_client(
            "openai_responses", model="gpt-test", api_key=KEY, base_url=server.url + "/v1"
        )
        async with client:
            response = await client.chat([Message(role="user", content="Hi")])
    assert type(client).__name__ == "ResponsesClient"
    module = sys.modules[type(client).__module__]
    assert Path(str(module.__file__)).is_relative_to(installed)  # the wheel's copy
    assert response.text == "Hello from a plugin."
    assert server.requests[0].path == "/v1/responses"


def indented(code: str, margin: str) -> str:
    """`code` with `margin` before each line that is not empty."""
    return "\n".join(margin + line if line else line for line in code.split("\n"))


def test_the_docs_page_quotes_the_example_as_it_is() -> None:
    page = PLUGIN.parents[1] / "docs" / "how-to" / "write-a-provider.md"
    quoted = 0
    for block in fenced_blocks(page):
        title = re.search(r'title="([^"]+)"', block.info)
        if title is None:
            continue
        source = (PLUGIN / title.group(1)).read_text(encoding="utf-8")
        code = block.code.rstrip("\n")
        forms = [code, indented(code, "    ")]  # a method is quoted without its class
        assert any(form in source for form in forms), f"{block.where}: not in {title.group(1)}"
        quoted += 1
    assert quoted >= 10
