"""The embedded local model without a real model: configuration and errors."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import glassagent.local
from glassagent._local.child import configure
from glassagent.errors import ConfigurationError, GlassAgentError, UserError
from glassagent.local import (
    DEFAULT_MODEL,
    LocalServer,
    LocalServerError,
    ModelDownloadError,
    ModelFileError,
    default_chat_template,
    default_threads,
)

needs_xllamacpp = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason='needs "glassagent[local]"'
)


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "models"
    monkeypatch.setenv("GLASSAGENT_MODEL_DIR", str(directory))
    return directory


def test_public_face_has_a_sorted_all_that_resolves() -> None:
    assert glassagent.local.__all__ == sorted(glassagent.local.__all__)
    for name in glassagent.local.__all__:
        assert getattr(glassagent.local, name) is not None
    assert glassagent.local.__doc__


def test_importing_the_public_face_loads_neither_httpx_nor_llama_cpp() -> None:
    code = (
        "import sys, glassagent.local\n"
        "print([m for m in ('httpx', 'xllamacpp', 'huggingface_hub') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_errors_belong_to_the_one_tree() -> None:
    assert issubclass(ModelFileError, ConfigurationError)
    assert issubclass(ModelDownloadError, GlassAgentError)
    assert issubclass(LocalServerError, GlassAgentError)


def test_the_shipped_chat_template_calls_tools_with_bare_json() -> None:
    template = default_chat_template()
    assert "To call a function, reply with only a json object with function name and arguments" in (
        template
    )
    assert "<tool_call>" not in template
    assert "Apache License" in template
    notice = Path(glassagent.local.__file__).parent / "_local" / "templates" / "NOTICE"
    assert "Qwen" in notice.read_text()


def test_bad_arguments_and_a_stopped_server_are_user_errors() -> None:
    with pytest.raises(UserError):
        LocalServer(context_size=0)
    with pytest.raises(UserError):
        LocalServer(threads=0)
    server = LocalServer("model.gguf")
    assert not server.running
    assert "stopped" in repr(server)
    for attribute in ("base_url", "model_name", "pid", "log_path"):
        with pytest.raises(UserError, match="not running"):
            getattr(server, attribute)
    server.stop()  # stopping a stopped server does nothing


def test_a_missing_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(ConfigurationError, match=r'pip install "glassagent\[local\]"'):
        LocalServer(tmp_path / "model.gguf").start()


@needs_xllamacpp
def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="not found"):
        LocalServer(tmp_path / "nowhere.gguf").start()


@needs_xllamacpp
async def test_a_file_that_is_not_gguf_is_rejected_before_starting(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("not a model")
    with pytest.raises(ModelFileError, match="Not a GGUF"):
        async with LocalServer(path):
            pass


@needs_xllamacpp
def test_an_incomplete_default_model_file_is_rejected(models_dir: Path) -> None:
    models_dir.mkdir()
    (models_dir / DEFAULT_MODEL.file_name).write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(ModelFileError, match="incomplete or corrupt"):
        LocalServer(models_dir / DEFAULT_MODEL.file_name).start()


@needs_xllamacpp
def test_a_corrupt_model_fails_to_start_with_the_log_tail(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(b"GGUF" + b"\xff" * 4096)
    server = LocalServer(path, startup_timeout=60)
    with pytest.raises(LocalServerError, match="exited during start-up") as info:
        server.start()
    assert info.value.log_tail.strip()
    assert not server.running


@needs_xllamacpp
async def test_a_corrupt_model_fails_to_start_in_async_code_too(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(b"GGUF" + b"\xff" * 4096)
    template = tmp_path / "template.jinja"
    template.write_text("{{ messages }}")
    with pytest.raises(LocalServerError) as info:
        async with LocalServer(path, chat_template=template, threads=1, port=None):
            pass
    assert "log ends with" in str(info.value)


def test_the_default_thread_count_leaves_one_cpu_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert default_threads() == 3
    assert LocalServer("m.gguf").threads == 3
    assert LocalServer("m.gguf", threads=4).threads == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert default_threads() == 1  # the busy 2-core machine of the report
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5}, raising=False)
    assert default_threads() == 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert default_threads() == 7
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert default_threads() == 1


@needs_xllamacpp
def test_the_child_configures_the_real_xllamacpp_params() -> None:
    import xllamacpp

    config = {
        "model_path": "/models/m.gguf",
        "alias": "m",
        "context_size": 1024,
        "threads": 2,
        "chat_template": "{{ messages }}",
        "port": 43210,
        "api_key": "k" * 43,
        "log_path": "/tmp/x.log",
    }
    params = configure(xllamacpp.CommonParams(), config)
    assert params.api_keys == ["k" * 43]
    assert params.ui is False
    assert params.endpoint_slots is False
    assert params.cors_origins == "http://127.0.0.1:43210"
    assert params.cors_credentials is False
    assert params.hostnames == ["127.0.0.1"]
    assert params.cpuparams.n_threads == params.cpuparams_batch.n_threads == 2
    assert params.model_alias in ({"m"}, "m")  # a set in recent versions, not {"m"} split up
