"""What a server without durable turns, and `create_app(durable=...)`, refuse (no DBOS
starts here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from glassagent.errors import ConfigurationError
from glassagent.server import InvokeError, InvokeRequest, create_app
from tests.support.cli import run_cli
from tests.support.server import INVOKE, echo_client, http


async def test_a_server_without_durable_turns_refuses_a_run_id() -> None:
    app = create_app(model=echo_client())
    async with http(app) as api:
        refused = await api.post(INVOKE, json={"message": "Hi", "run_id": "r-1"})
        answers = await api.post(INVOKE, json={"run_id": "r-1", "approvals": {"c1": True}})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "not_durable")
    assert (answers.status_code, answers.json()["error"]["code"]) == (400, "not_durable")


def test_a_run_id_is_checked_like_a_chat_id() -> None:
    assert InvokeRequest.from_dict({"message": "Hi", "run_id": "turn-1"}).run_id == "turn-1"
    for bad in ("../x", "", 7):
        with pytest.raises(InvokeError) as caught:
            InvokeRequest.from_dict({"message": "Hi", "run_id": bad})
        assert [p.location for p in caught.value.problems] == ["run_id"]


def test_create_app_refuses_durable_turns_with_host_facts_or_a_bad_url(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    url = f"sqlite:///{tmp_path / 'turns.sqlite'}"
    with pytest.raises(ConfigurationError, match="host"):
        create_app(model=echo_client(), durable=url, host={"debug_mode": True})
    with pytest.raises(ConfigurationError, match="database URL"):
        create_app(model=echo_client(), durable="")
    with pytest.raises(ConfigurationError, match="takeover_after"):
        create_app(model=echo_client(), durable=url, takeover_after=0.1)
    assert not (tmp_path / "turns.sqlite").exists()  # nothing opened before the lifespan


def test_serve_worker_id_needs_durable(tmp_path: Path) -> None:
    done = run_cli("serve", "--worker-id", "w1", "--port", "0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--worker-id needs --durable" in done.stderr
    assert "Traceback" not in done.stderr
