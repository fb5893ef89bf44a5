"""Model profiles for tests: a directory of them, priced or not, on ``GLASSAGENT_PROFILE_PATH``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from glassagent.profiles import profile_file_name, reload_profiles

PRICING = {
    "input_per_1m_tokens": "1.00",
    "output_per_1m_tokens": "4.00",
    "currency": "USD",
    "as_of": "2026-11-24",
}
"""$1 per million input tokens, $4 per million output tokens."""


def write_profile(directory: Path, model_id: str, pricing: dict[str, Any] | None = PRICING) -> Path:
    """Write the profile of `model_id` (with `pricing`, or none) into `directory`."""
    data: dict[str, Any] = {
        "basic_info": {"id": model_id, "name": model_id, "provider": "acme"},
        "capabilities": {"context_length": 1_000_000},
        "features": {
            "supports_function_calling": True,
            "supports_streaming": True,
            "is_multimodal": False,
            "supports_reasoning": False,
        },
    }
    if pricing is not None:
        data["pricing"] = pricing
    else:
        data["basic_info"]["provider"] = "local"  # so no price database is asked
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / profile_file_name(model_id)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@contextmanager
def acme_profiles(
    directory: Path, monkeypatch: pytest.MonkeyPatch, pricing: dict[str, Any] = PRICING
) -> Iterator[Path]:
    """``acme-priced`` with `pricing` and ``acme-free`` without prices, the only profiles known.

    Both are written into `directory`, which goes on ``GLASSAGENT_PROFILE_PATH`` while the
    block runs; the profiles are read again on the way in and out.
    """
    write_profile(directory, "acme-priced", pricing)
    write_profile(directory, "acme-free", pricing=None)
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(directory))
    reload_profiles()
    try:
        yield directory
    finally:
        reload_profiles()


def profile_data(model_id: str = "acme-1", **sections: Any) -> dict[str, Any]:
    """A small valid profile of `model_id` in the seed's format, with `sections` set over it."""
    data: dict[str, Any] = {
        "basic_info": {"id": model_id, "name": "Acme One", "provider": "acme"},
        "capabilities": {"context_length": 8192},
        "features": {
            "supports_function_calling": True,
            "supports_streaming": False,
            "is_multimodal": False,
            "supports_reasoning": False,
        },
    }
    data.update(sections)
    return data
