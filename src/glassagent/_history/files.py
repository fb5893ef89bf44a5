"""Files: bounded reads, atomic writes (temp file + fsync + rename) and content revisions."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from glassagent._history import formats
from glassagent._history.model import HistoryLimits


def revision_of(data: bytes) -> str:
    """The revision of stored bytes: their SHA-256, in hex."""
    return hashlib.sha256(data).hexdigest()


def read_bounded(path: Path, limits: HistoryLimits) -> bytes:
    """Read a file, refusing it by its size, before reading, when it is over the limit."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limits.max_total_bytes:
            raise formats.too_big(size, limits)
        return f.read(limits.max_total_bytes + 1)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old file or the new one.

    The bytes go to a temporary file in the same directory, are flushed to disk, then the
    file is renamed over `path` (atomic on POSIX and Windows); the directory entry is synced
    too where the platform allows. On any failure the temporary file is removed.
    """
    import tempfile  # only when writing: keeps `import glassagent` light

    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    if os.name != "posix":  # pragma: no cover - Windows cannot open a directory
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
