"""The official source of a model: its Hugging Face repository, through `huggingface_hub`.

The attempt is bounded: it is skipped when ``HF_HUB_OFFLINE`` is set or `huggingface_hub` is
not installed, and it starts with one metadata request with a short timeout and no retries,
so a machine without internet falls back to the package-index mirror within seconds. Only
once the hub has answered does the download itself run, with huggingface_hub's own retries.
The file goes to a temporary directory next to the target and is moved into place only after
its size and SHA-256 match the pinned ones.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from glassagent._local.model import ModelInfo, ModelSource, place_verified

PROBE_TIMEOUT = 5.0
"""Seconds to wait for the hub's answer to the first (metadata) request."""


class HubUnavailable(Exception):
    """The hub could not be used; the message says why (internal: never leaves the package)."""


def hub_skip_reason(info: ModelInfo) -> str | None:
    """Why the hub is not tried for `info`, or ``None`` when it is."""
    if not info.hf_repo:
        return "the model has no Hugging Face repository"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    if importlib.util.find_spec("huggingface_hub") is None:
        return 'huggingface_hub is not installed (pip install "glassagent[local]")'
    return None


def hub_location(info: ModelInfo) -> str:
    """A short description of the file on the hub, for progress lines."""
    revision = (info.hf_revision or "main")[:12]
    return f"{info.hf_repo}@{revision}/{info.file_name}"


def fetch_from_hub(info: ModelInfo, target: Path) -> ModelSource:
    """Fetch `info` from its Hugging Face repository into `target`.

    Raises:
        HubUnavailable: The hub could not be reached or the download failed.
        ModelFileError: The file does not match the pinned checksum (nothing is saved).
    """
    import huggingface_hub

    assert info.hf_repo is not None
    revision = info.hf_revision or "main"
    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now: huggingface_hub reads it once
    url = huggingface_hub.hf_hub_url(
        info.hf_repo, info.file_name, revision=revision, endpoint=endpoint
    )
    try:  # one short request, no retries: fail fast when offline
        huggingface_hub.get_hf_file_metadata(url, token=False, timeout=PROBE_TIMEOUT)
    except Exception as exc:
        raise HubUnavailable(_reason(exc)) from exc
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".hf-download-") as tmp:
        try:
            path = huggingface_hub.hf_hub_download(
                info.hf_repo,
                info.file_name,
                revision=revision,
                local_dir=tmp,
                endpoint=endpoint,
                token=False,  # a public file: the user's token is not needed
                etag_timeout=PROBE_TIMEOUT,
            )
        except Exception as exc:
            raise HubUnavailable(_reason(exc)) from exc
        place_verified(Path(path), info, target)
    return ModelSource(kind="huggingface", location=url, sha256=info.sha256)


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
