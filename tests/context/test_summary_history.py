"""Summaries and pinned messages in a history: both versions, validation, the SQL rows."""

from __future__ import annotations

from typing import Any

import pytest

from glassagent import Message
from glassagent.errors import HistoryValidationError
from glassagent.history import History


def chat() -> History:
    history = History()
    history.append(Message(role="user", content="my name is Ada", pinned=True))
    history.append(Message(role="assistant", content="hello Ada"))
    history.append(Message(role="system", content="Ada said hello.", summary_of=2))
    return history


@pytest.mark.parametrize("version", ["1", "2.0"])
def test_summary_of_and_pinned_round_trip_in_both_versions(version: str) -> None:
    data = chat().to_dict(version)  # type: ignore[arg-type]
    bodies = data["messages"].values() if version == "1" else data["messages"]
    assert [(b.get("pinned"), b.get("summary_of")) for b in bodies] == [
        (True, None),
        (None, None),
        (None, 2),
    ]
    loaded = History.from_dict(data)
    assert [(m.pinned, m.summary_of) for m in loaded.to_messages()] == [
        (True, None),
        (False, None),
        (False, 2),
    ]
    other = "2.0" if version == "1" else "1"
    again = History.from_dict(loaded.to_dict(other))  # type: ignore[arg-type]
    assert again.to_messages() == loaded.to_messages()


@pytest.mark.parametrize(
    ("field", "value"),
    [("summary_of", -1), ("summary_of", True), ("summary_of", "2"), ("pinned", "yes")],
)
def test_bad_summary_fields_are_refused(field: str, value: Any) -> None:
    data = chat().to_dict()
    data["messages"][0][field] = value
    with pytest.raises(HistoryValidationError, match=field):
        History.from_dict(data)
