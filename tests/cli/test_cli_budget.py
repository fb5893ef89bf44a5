"""The command line with a budget and a cost: how a budget stop ends a turn, what a turn cost."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

import glassagent.cli
from glassagent import LLMResponse, RunResult, ToolCall, Usage
from glassagent.cli._view import PLAIN_MARKS, HumanView, PlainWriter, Turn, money
from glassagent.history import History
from glassagent.llm import register_provider
from glassagent.profiles import Cost
from glassagent.testing import ScriptedClient
from tests.support.profiles import acme_profiles

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
LIST = LLMResponse(tool_calls=[ToolCall("c1", "list_files", {})], usage=Usage(900, 10))
"""A call of list_files that used 900 input tokens: with the next prompt, over 0.001 USD."""


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``acme-priced`` at $1 and $4 per million tokens; ``acme-free`` without prices."""
    with acme_profiles(tmp_path / "profiles", monkeypatch) as directory:
        yield directory


def scripted(*answers: LLMResponse | str, model: str = "acme-priced") -> ScriptedClient:
    client = ScriptedClient(list(answers), model=model)
    register_provider("budgeted", lambda **options: client)
    return client


def run(*args: str) -> list[str]:
    return ["run", "--provider", "budgeted", "--workspace", str(SAMPLE), *args]


# ---- run: exit code 3, the turn kept ---------------------------------------------------------


def test_a_budget_stop_exits_3_saves_the_turn_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = scripted(LIST, "never asked")
    saved = tmp_path / "h.json"
    code = glassagent.cli.main(run("--max-cost", "0.001", "--history", str(saved), "List"))
    out, err = capsys.readouterr()
    assert code == 3, err
    assert len(client.requests) == 1
    assert [m.role for m in History.load(saved).thread()] == ["user", "assistant", "tool"]
    assert err.startswith("glassagent: the budget stopped the turn: the run has cost 0.00094 USD")
    assert len(err.strip().splitlines()) == 1
    assert "(the budget stopped the turn: the run has cost 0.00094 USD" in out
    assert "what came so far is kept)" in out
    assert "-- 900 in / 10 out tokens - 1 model call - 0.00094 USD - " in out


def test_a_budget_stop_is_the_last_json_event(capsys: pytest.CaptureFixture[str]) -> None:
    client = scripted(LIST, "never asked")
    code = glassagent.cli.main(run("--json", "--max-turn-tokens", "1500", "List"))
    out, err = capsys.readouterr()
    assert code == 3
    stream = [json.loads(line) for line in out.splitlines()]
    assert stream[-1]["type"] == "budget_exceeded"
    assert stream[-1]["limit"] == "max_tokens"
    assert len(client.requests) == 1
    assert "the budget stopped the turn" in err


def test_a_token_budget_the_first_prompt_passes_runs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = scripted("never asked")
    code = glassagent.cli.main(run("--json", "--max-turn-tokens", "10", "Hello"))
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert client.requests == []
    assert "--max-turn-tokens 10 is less than the first model call's prompt alone" in err
    assert "nothing was run" in err


def test_a_turn_within_the_budget_exits_0_and_shows_its_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted(LLMResponse("Two files.", usage=Usage(1000, 500)))
    code = glassagent.cli.main(run("--max-cost", "1", "--max-turn-tokens", "100000", "List"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "-- 1,000 in / 500 out tokens - 1 model call - 0.003 USD - " in out
    assert err == ""


def test_an_unpriced_turn_shows_no_cost(capsys: pytest.CaptureFixture[str]) -> None:
    scripted(LLMResponse("Two files.", usage=Usage(1000, 500)), model="acme-free")
    assert glassagent.cli.main(run("List")) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("-- "))
    assert line.startswith("-- 1,000 in / 500 out tokens - 1 model call - ")
    assert "USD" not in line


def test_a_cost_budget_needs_a_model_with_prices(capsys: pytest.CaptureFixture[str]) -> None:
    client = scripted("never asked", model="acme-free")
    assert glassagent.cli.main(run("--max-cost", "0.05", "Hi")) == 2
    err = capsys.readouterr().err
    assert "--max-cost needs a model with prices, and 'acme-free' has none" in err
    assert len(err.strip().splitlines()) == 1
    assert client.requests == []


@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan"])
def test_max_cost_must_be_a_positive_amount(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert glassagent.cli.main(run("--max-cost", value, "Hi")) == 2
    assert "argument --max-cost: expected a positive amount" in capsys.readouterr().err


# ---- chat: the conversation goes on ----------------------------------------------------------


def test_a_budget_stop_in_chat_is_shown_saved_and_the_chat_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted(LIST, LLMResponse("Done.", usage=Usage(100, 5)))
    saved = tmp_path / "h.json"
    read, write = os.pipe()
    os.write(write, b"List the files\nAnd now?\n/exit\n")
    os.close(write)
    with open(read, encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        args = ["--provider", "budgeted", "--workspace", str(SAMPLE), "--max-cost", "0.001"]
        code = glassagent.cli.main([*args, "--history", str(saved)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(the budget stopped the turn: the run has cost 0.00094 USD" in out
    assert "Done." in out
    roles = [m.role for m in History.load(saved).thread()]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]


# ---- the view -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("0.00224", "0.00224 USD"),
        ("0.002240000", "0.00224 USD"),
        ("0.0000001234567", "0.0000001235 USD"),
        ("1.5", "1.50 USD"),
        ("12345.678", "12345.68 USD"),
        ("0", "0.00 USD"),
    ],
)
def test_money_shows_four_significant_digits_and_at_least_cents(amount: str, shown: str) -> None:
    assert money(Cost(Decimal(amount))) == shown


def test_money_of_an_unpriced_cost_is_none() -> None:
    assert money(Cost(None, reason="no prices")) is None


def test_a_turn_without_model_calls_shows_no_cost() -> None:
    lines: list[str] = []

    class Lines(PlainWriter):
        def write(self, text: str, style: str | None = None) -> None:
            lines.append(text)

    result = RunResult("", (), (), (), Usage(), 0, "budget", cost=Cost(Decimal(0)))
    HumanView(Lines(sys.stdout), PLAIN_MARKS).turn_done(Turn(result, None, 1.0))
    assert "".join(lines) == "-- 0 in / 0 out tokens - 0 model calls - 1.0 s\n"


def test_the_local_model_is_not_started_for_a_turn_its_budget_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # where a warm server would be
    args = ["run", "--provider", "local", "--workspace", str(SAMPLE), "--max-turn-tokens", "10"]
    code = glassagent.cli.main([*args, "hi"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "nothing was run" in err
    assert "local model" not in err  # neither opened nor started
    assert list(runtime.iterdir()) == []
