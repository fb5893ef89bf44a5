"""Datasets: cases from JSON Lines, YAML and JSON, and errors that name file, case and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from glassagent import Message
from glassagent.errors import DatasetError, UserError
from glassagent.evals import Case, Dataset, ExpectedCall


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


CASES = [
    {"name": "capital", "input": "Capital of France?", "expected_output": "Paris", "tags": ["geo"]},
    {
        "name": "weather",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "expected_tool_calls": [
            {
                "name": "get_weather",
                "arguments": {"city": "Paris"},
                "any_of": {"unit": ["celsius", ""]},
                "optional": ["unit"],
            }
        ],
        "tool_order": "any_order",
        "metadata": {"source": "handwritten"},
    },
    {
        "name": "shape",
        "input": "Give a JSON point.",
        "evaluators": ["json_schema"],
        "metadata": {"schema": {"type": "object", "required": ["x"]}},
    },
]


def test_jsonl_cases_are_read_with_every_field(tmp_path: Path) -> None:
    dataset = Dataset.load(write_jsonl(tmp_path / "smoke.jsonl", CASES))
    assert dataset.name == "smoke"
    assert [case.name for case in dataset] == ["capital", "weather", "shape"]
    capital, weather, shape = dataset.cases
    assert capital == Case("capital", "Capital of France?", "Paris", tags=("geo",))
    assert capital.scored_by() == ("exact",)
    assert weather.input == (
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris?"),
    )
    assert weather.expected_tool_calls == (
        ExpectedCall(
            "get_weather",
            {"city": "Paris"},
            any_of={"unit": ("celsius", "")},
            optional=frozenset({"unit"}),
        ),
    )
    assert weather.tool_order == "any_order"
    assert weather.scored_by() == ("trajectory",)
    assert shape.scored_by() == ("json_schema",)
    assert weather.expected_tool_calls is not None
    assert (
        ExpectedCall.from_dict(weather.expected_tool_calls[0].to_dict(), where="x")
        == (weather.expected_tool_calls[0])
    )


def test_yaml_and_json_hold_the_same_cases(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    expected = Dataset.load(write_jsonl(tmp_path / "smoke.jsonl", CASES)).cases
    (tmp_path / "smoke.yaml").write_text(yaml.safe_dump(CASES), encoding="utf-8")
    (tmp_path / "named.yml").write_text(
        yaml.safe_dump({"name": "suite", "cases": CASES}), encoding="utf-8"
    )
    (tmp_path / "smoke.json").write_text(json.dumps(CASES), encoding="utf-8")
    assert Dataset.load(tmp_path / "smoke.yaml").cases == expected
    named = Dataset.from_yaml(tmp_path / "named.yml")
    assert (named.name, named.cases) == ("suite", expected)
    assert Dataset.load(tmp_path / "smoke.json").cases == expected


def test_blank_lines_are_skipped_and_lines_counted(tmp_path: Path) -> None:
    path = tmp_path / "gaps.jsonl"
    path.write_text('\n{"name": "a", "input": "hi"}\n\n{"name": "b"}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        Dataset.load(path)
    assert str(caught.value) == (
        f"{path}, line 4 (case 'b'): input: is missing (a prompt, or a list of messages)."
    )
    assert caught.value.field == "input"


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ({"name": "c", "input": 3}, "input", "must be a prompt or a list of messages, not int"),
        ({"name": "c", "input": "x", "tags": "geo"}, "tags", "must be a list of strings"),
        ({"name": "c", "input": "x", "expected_tool_calls": {}}, "expected_tool_calls", "list"),
        (
            {"name": "c", "input": "x", "expected_tool_calls": [{"name": "f", "arguments": [1]}]},
            "expected_tool_calls[0].arguments",
            "must be an object",
        ),
        (
            {"name": "c", "input": "x", "expected_tool_calls": [{"arguments": {}}]},
            "expected_tool_calls[0].name",
            "non-empty string",
        ),
        (
            {"name": "c", "input": "x", "expected_tool_calls": [{"name": "f", "any_of": {"a": 1}}]},
            "expected_tool_calls[0].any_of.a",
            "list of acceptable values",
        ),
        ({"name": "c", "input": "x", "tool_order": "sorted"}, "tool_order", "'sorted'"),
        ({"name": "c", "input": "x", "evaluators": ["fuzzy"]}, "evaluators[0]", "unknown"),
        ({"name": "c", "input": "x", "evaluators": ["exact"]}, "expected_output", "needed"),
        (
            {"name": "c", "input": "x", "evaluators": ["trajectory"]},
            "expected_tool_calls",
            "needed",
        ),
        ({"name": "c", "input": "x", "evaluators": ["json_schema"]}, "metadata.schema", "needed"),
        ({"name": "c", "input": "x", "expectd_output": "y"}, "expectd_output", "unknown field"),
        (
            {"name": "c", "input": [{"role": "user", "content": "a"}, {"role": "assistant"}]},
            "input",
            "must end with the user's message",
        ),
        ({"name": "c", "input": [{"role": "robot", "content": "a"}]}, "input[0]", "not a message"),
    ],
)
def test_each_invalid_field_is_named_with_its_case_and_line(
    tmp_path: Path, row: dict[str, Any], field: str, problem: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"name": "ok", "input": "fine"}, row])
    with pytest.raises(DatasetError) as caught:
        Dataset.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 2 (case 'c'): {field}: "), message
    assert problem in message
    assert caught.value.field == field
    assert isinstance(caught.value, UserError)


def test_file_level_problems_name_the_file(tmp_path: Path) -> None:
    no_name = write_jsonl(tmp_path / "a.jsonl", [{"input": "x"}])
    with pytest.raises(DatasetError, match=r"a\.jsonl, line 1: name: must be a non-empty"):
        Dataset.load(no_name)
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"name": "a", "input": "x"}\n{nope\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"b\.jsonl, line 2: not JSON"):
        Dataset.load(broken)
    twice = write_jsonl(tmp_path / "c.jsonl", [{"name": "a", "input": "x"}] * 2)
    with pytest.raises(DatasetError, match=r"case 1 \('a'\): name: the name is already that of"):
        Dataset.load(twice)
    with pytest.raises(DatasetError, match=r"d\.csv: a dataset is a \.jsonl"):
        Dataset.load(tmp_path / "d.csv")
    with pytest.raises(DatasetError, match=r"e\.jsonl: cannot be read"):
        Dataset.load(tmp_path / "e.jsonl")
    (tmp_path / "f.json").write_text('{"cases": 3}', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"f\.json: cases: must be a list"):
        Dataset.load(tmp_path / "f.json")


def test_yaml_errors_name_the_item(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "s.yaml"
    path.write_text("- name: a\n  input: hi\n- name: b\n  input: hi\n  tags: 5\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"s\.yaml, case 1 \(case 'b'\): tags: must be a list"):
        Dataset.load(path)


def test_cases_built_in_python_are_checked_too() -> None:
    with pytest.raises(DatasetError, match=r"case 'a': expected_tool_calls\[0\]: must be an"):
        Case("a", "x", expected_tool_calls=[{"name": "f"}])  # type: ignore[list-item]
    with pytest.raises(DatasetError, match=r"dataset 'd', case 1 \('a'\): name: the name is"):
        Dataset("d", [Case("a", "x"), Case("a", "y")])
    with pytest.raises(DatasetError, match="input: is an empty prompt"):
        Case("a", "  ")
    case = Case("a", "x", tags=["t"], evaluators=["contains"], expected_output="y")  # type: ignore[arg-type]
    assert (case.tags, case.evaluators) == (("t",), ("contains",))
    assert len(Dataset("d", [case])) == 1


def test_importing_evals_loads_neither_yaml_rich_nor_jsonschema() -> None:
    code = (
        "import sys, glassagent; assert 'glassagent.evals' not in sys.modules; "
        "import glassagent.evals; "
        "print(sorted(m for m in ('yaml', 'rich', 'jsonschema') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
