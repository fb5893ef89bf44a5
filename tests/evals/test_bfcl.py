"""BFCL's sets as datasets: a data folder in BFCL's layout, its wheel, the installed package,
the real wheel from the registry (``-m slow``), and the agent each case is run with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from glassagent import LLMResponse, Message, ToolCall
from glassagent._core.errors import ConfigurationError, DatasetError, UserError
from glassagent._evals.bfcl import BFCL_CATEGORIES, bfcl_agent, load_bfcl
from glassagent._evals.model import ExpectedCall
from glassagent._evals.runner import evaluate
from glassagent.testing import ScriptedClient
from tests.support.bfcl import function, write_bfcl

AREA = function(
    "geometry.area",
    {
        "shape": {"type": "string", "enum": ["circle", "square"]},
        "size": {"type": "float", "description": "The radius or the side."},
        "sides": {"type": "tuple", "items": {"type": "float"}, "optional": True},
        "extra": {"type": "any"},
        "options": {"type": "dict", "properties": {"round": {"type": "integer"}}},
    },
    ["shape", "size"],
)
WEATHER = function("get_weather", {"city": {"type": "string"}}, ["city"])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A folder with an old and a new ``simple_python`` set and a ``parallel`` one."""
    write_bfcl(tmp_path, "simple_python", [("old_0", "Old.", [WEATHER], [])], version=3)
    simple = [
        (
            f"simple_python_{n}",
            f"Area of a circle of radius {n}?",
            [AREA],
            [{"geometry.area": {"shape": ["circle"], "size": [n], "sides": ["", [n, 2]]}}],
        )
        for n in range(10)
    ]
    write_bfcl(tmp_path, "simple_python", simple)
    truth = [{"get_weather": {"city": ["Paris"]}}, {"get_weather": {"city": ["Oslo", "OSL"]}}]
    write_bfcl(tmp_path, "parallel", [("parallel_0", "Paris and Oslo?", [WEATHER], truth)])
    return tmp_path


def test_a_set_becomes_cases_with_schemas_and_expected_calls(data: Path) -> None:
    dataset = load_bfcl(data=data)
    assert dataset.name == "bfcl-simple_python"
    assert [case.name for case in dataset] == [f"simple_python_{n}" for n in range(10)]
    case = dataset.cases[3]
    assert case.input == "Area of a circle of radius 3?"
    assert case.tags == ("simple_python",)
    assert case.tool_order == "in_order"
    # the integer answer for a float parameter is a float; "" makes an argument optional
    assert case.expected_tool_calls == (
        ExpectedCall(
            "geometry_area",
            {"shape": "circle", "size": 3.0, "sides": [3.0, 2.0]},
            optional=frozenset({"sides"}),
        ),
    )
    assert type(case.expected_tool_calls[0].arguments["size"]) is float
    (schema,) = case.metadata["functions"]
    assert schema == {
        "name": "geometry_area",
        "description": "The function geometry.area.",
        "parameters": {
            "type": "object",
            "properties": {
                "shape": {"type": "string", "enum": ["circle", "square"]},
                "size": {"type": "number", "description": "The radius or the side."},
                "sides": {"type": "array", "items": {"type": "number"}},
                "extra": {},
                "options": {"type": "object", "properties": {"round": {"type": "integer"}}},
            },
            "required": ["shape", "size"],
        },
    }
    assert case.metadata["bfcl_names"] == {"geometry_area": "geometry.area"}


def test_a_multi_call_set_is_checked_in_any_order(data: Path) -> None:
    (case,) = load_bfcl("parallel", data=data)
    assert case.tool_order == "any_order"
    assert case.tags == ("parallel",)
    assert case.expected_tool_calls == (
        ExpectedCall("get_weather", {"city": "Paris"}),
        ExpectedCall("get_weather", any_of={"city": ("Oslo", "OSL")}),
    )


def test_count_spreads_the_cases_over_the_set(data: Path) -> None:
    names = [case.name for case in load_bfcl(data=data, count=3)]
    assert names == ["simple_python_0", "simple_python_3", "simple_python_6"]
    assert len(load_bfcl(data=data, count=100)) == 10


def test_a_wheel_a_folder_holding_it_and_the_installed_package(
    data: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = tmp_path_factory.mktemp("wheels")
    wheel = place / "bfcl_eval-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in data.rglob("*.json"):
            archive.write(path, f"bfcl_eval/data/{path.relative_to(data)}")
    expected = [case.name for case in load_bfcl(data=data)]
    assert [case.name for case in load_bfcl(data=wheel)] == expected
    assert [case.name for case in load_bfcl(data=str(place))] == expected
    # installed: the package's own data folder
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    (site / "bfcl_eval" / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    assert [case.name for case in load_bfcl()] == expected
    assert "bfcl_eval" not in sys.modules  # found, not imported


def test_without_the_package_or_with_bad_data_the_errors_say_what_to_do(
    data: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if importlib.util.find_spec("bfcl_eval") is not None:
        pytest.skip("bfcl-eval is installed in this environment")
    with pytest.raises(ConfigurationError, match="install bfcl-eval, or pass its wheel"):
        load_bfcl()
    with pytest.raises(ConfigurationError, match="neither a bfcl-eval wheel nor a folder"):
        load_bfcl(data=data / "missing")
    with pytest.raises(DatasetError, match=r"no BFCL_v\*_multiple\.json here"):
        load_bfcl("multiple", data=data)
    empty = tmp_path_factory.mktemp("empty") / "bfcl_eval-0-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("bfcl_eval/__init__.py", "")
    with pytest.raises(DatasetError, match=r"no BFCL_v\*_simple_python\.json here"):
        load_bfcl(data=empty)
    (empty.parent / "bad.whl").write_text("not a zip", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.whl: not a readable wheel"):
        load_bfcl(data=empty.parent / "bad.whl")
    with pytest.raises(UserError, match="Unknown BFCL category 'multi_turn_base'"):
        load_bfcl("multi_turn_base", data=data)
    with pytest.raises(UserError, match="`count` must be a positive integer"):
        load_bfcl(data=data, count=0)
    broken = tmp_path_factory.mktemp("broken")
    write_bfcl(broken, "simple_python", [("simple_python_0", "Hi.", [WEATHER], [])])
    answers = broken / "possible_answer" / "BFCL_v4_simple_python.json"
    answers.write_text('{"id": "another", "ground_truth": []}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="simple_python_0: no possible answer for it"):
        load_bfcl(data=broken)
    answers.write_text('{"id": "simple_python_0", "ground_truth": [{"nope": {}}]}\n', "utf-8")
    with pytest.raises(DatasetError, match="the answer calls 'nope', not a function of"):
        load_bfcl(data=broken)
    answers.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"BFCL_v4_simple_python\.json, line 1: not JSON"):
        load_bfcl(data=broken)


async def test_the_agent_offers_the_functions_and_is_scored_on_its_calls(data: Path) -> None:
    dataset = load_bfcl("parallel", data=data)
    right = [
        ToolCall("a", "get_weather", {"city": "oslo"}),
        ToolCall("b", "get_weather", {"city": "Paris"}),
    ]
    client = ScriptedClient([LLMResponse(tool_calls=right), "Sunny in both."])
    agent = bfcl_agent(client, dataset.cases[0])
    assert agent.max_iterations == 3
    assert agent.stop_repeats
    (tool,) = agent.tools
    assert tool.definition.parameters["properties"] == {"city": {"type": "string"}}
    report = await evaluate(lambda case: bfcl_agent(client, case), dataset, progress=False)
    assert [t.name for t in client.requests[0].tools] == ["get_weather"]
    attempt = report.cases[0].attempts[0]
    assert (attempt.passed, attempt.tool_calls, attempt.tool_errors) == (True, 2, 0)
    assert [s.evaluator for s in attempt.scores] == ["trajectory"]
    # one call wrong: half the score, and the reason names it
    wrong = [ToolCall("a", "get_weather", {"city": "Rome"}), right[1]]
    client = ScriptedClient([LLMResponse(tool_calls=wrong), "Done."])
    report = await evaluate(lambda case: bfcl_agent(client, case), dataset, progress=False)
    attempt = report.cases[0].attempts[0]
    assert (attempt.passed, attempt.score) == (False, 0.5)
    assert "got city='Rome'" in attempt.scores[0].reason


def test_the_agent_needs_the_functions(data: Path) -> None:
    case = load_bfcl(data=data).cases[0]
    client = ScriptedClient([])
    with pytest.raises(UserError, match="has no metadata\\['functions'\\]"):
        bfcl_agent(client, type(case)("bare", "Hi."))
    with pytest.raises(UserError, match="each function needs a name"):
        bfcl_agent(client, type(case)("odd", "Hi.", metadata={"functions": [{"x": 1}]}))


def test_a_system_message_makes_the_input_a_conversation(tmp_path: Path) -> None:
    write_bfcl(tmp_path, "live_simple", [("live_simple_0", "Paris?", [WEATHER], [])])
    questions = tmp_path / "BFCL_v4_live_simple.json"
    row = json.loads(questions.read_text(encoding="utf-8"))
    row["question"][0].insert(0, {"role": "system", "content": "Be brief."})
    questions.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (case,) = load_bfcl("live_simple", data=tmp_path)
    assert case.input == (
        Message(role="system", content="Be brief."),
        Message(role="user", content="Paris?"),
    )


@pytest.mark.slow
def test_the_real_sets_load_from_the_wheel_on_the_registry(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    environment.update({k: v for k, v in _ORIGINAL_TLS.items() if v is not None})
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "bfcl-eval", "--no-deps", "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"the registry is not reachable: pip download failed: {done.stderr[-300:]}")
    (wheel,) = tmp_path.glob("bfcl_eval-*.whl")
    sizes = {}
    for category in BFCL_CATEGORIES:
        dataset = load_bfcl(category, data=wheel)
        sizes[category] = len(dataset)
        for case in dataset:  # every function is a valid tool
            bfcl_agent(ScriptedClient([]), case)
            assert case.expected_tool_calls
    assert sizes["simple_python"] >= 400
    assert sizes["parallel"] >= 200
    (first,) = load_bfcl(data=wheel, count=1)
    assert first.name == "simple_python_0"
    assert len(load_bfcl("multiple", data=tmp_path, count=20)) == 20


_ORIGINAL_TLS = {name: os.environ.get(name) for name in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
"""The TLS settings before the suite's guard replaced them (pip needs the real ones)."""
