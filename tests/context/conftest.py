"""The context tests' model: a profile with a 4,096-token window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent.profiles import profile_file_name, reload_profiles
from tests.support.context import MODEL, WINDOW


@pytest.fixture
def small_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A profile of `MODEL`: a 4,096-token window, answers of up to 1,024 tokens."""
    profile = {
        "basic_info": {"id": MODEL, "name": MODEL, "provider": "acme"},
        "capabilities": {"context_length": WINDOW, "max_completion_tokens": 1024},
        "features": {
            "supports_function_calling": True,
            "supports_streaming": True,
            "is_multimodal": False,
            "input_modalities": ["text"],
            "supports_reasoning": False,
        },
    }
    (tmp_path / profile_file_name(MODEL)).write_text(json.dumps(profile), encoding="utf-8")
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(tmp_path))
    reload_profiles()
    yield MODEL
    reload_profiles()
