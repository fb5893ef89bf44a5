"""Helpers shared by the history tests: the fixture documents and small accessors."""

import json
from pathlib import Path
from typing import Any

import pytest

from glassagent.errors import HistoryValidationError
from glassagent.history import History, HistoryLimits, HistoryMessage, HistoryProblem

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(version: str) -> dict[str, Any]:
    name = "history_v1.json" if version == "1" else "history_v2.json"
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text("utf-8"))
    return data


def ids(messages: list[HistoryMessage]) -> list[str]:
    return [m.id for m in messages]


def problems_of(data: Any, **limits: int) -> list[HistoryProblem]:
    with pytest.raises(HistoryValidationError) as info:
        History.from_dict(data, limits=HistoryLimits(**limits))
    return list(info.value.problems)


def messages_of(history: History, *ids_: str) -> list[HistoryMessage]:
    return [history[i] for i in ids_]
