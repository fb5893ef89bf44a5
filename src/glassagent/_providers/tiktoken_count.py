"""Token counts of OpenAI's models by tiktoken, when installed (``glassagent[openai-tokens]``).

tiktoken downloads an encoding's file the first time it is used (then reads it from its
cache). Each encoding is loaded once per process, in a thread of its own, so no event loop
waits on a download; a call that counts waits for the load up to `LOAD_SECONDS`. An encoding
that failed to load (no network, say) is not tried again: its counts are `None`, and the
agent estimates instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiktoken import Encoding

logger = logging.getLogger("glassagent")

PROVIDERS = frozenset({"openai", "azure_openai"})
"""The providers whose models tiktoken counts: OpenAI's own (other compatible servers serve
other models, with other tokenizers)."""

FALLBACK_ENCODING = "o200k_base"
"""The encoding of a model tiktoken does not know (a new model, an Azure deployment's name)."""

LOAD_SECONDS = 10.0
"""How long the first count waits for its encoding to load; later counts do not wait for a
load that took longer (they get `None` until it is done)."""

INLINE_CHARS = 8_000
"""Texts of up to this many characters in all are counted on the event loop (about a
millisecond); longer ones in a worker thread."""

_tiktoken: ModuleType | None = None
_missing = False
_lock = threading.Lock()


class _Load:
    """One encoding's load: a thread that fills `future` with the encoding, or `None`."""

    def __init__(self, name: str, tiktoken: ModuleType) -> None:
        self.name = name
        self._tiktoken = tiktoken
        self.future: concurrent.futures.Future[Encoding | None] = concurrent.futures.Future()
        self.waited_out = False
        """Whether a count waited `LOAD_SECONDS` in vain (later counts do not wait)."""
        threading.Thread(target=self._run, name=f"tiktoken {name}", daemon=True).start()

    def _run(self) -> None:
        self.future.set_running_or_notify_cancel()
        try:
            encoding: Encoding | None = self._tiktoken.get_encoding(self.name)
        except Exception as exc:  # any failure (no network, a bad file) means no counts
            logger.debug(
                "tiktoken could not load the encoding %s (%s: %s); token counts of OpenAI's "
                "models are estimated.",
                self.name,
                type(exc).__name__,
                exc,
            )
            encoding = None
        self.future.set_result(encoding)

    def failed(self) -> bool:
        """Whether the load is over without an encoding."""
        return self.future.done() and self.future.result() is None


_loads: dict[str, _Load] = {}


def _module_or_none() -> ModuleType | None:
    """The tiktoken module, imported on first use; `None` when it is not installed."""
    global _tiktoken, _missing
    if _tiktoken is None and not _missing:
        try:
            import tiktoken
        except ImportError:
            _missing = True
        else:
            _tiktoken = tiktoken
    return _tiktoken


def encoding_name(model: str) -> str | None:
    """The name of the tiktoken encoding of `model` (`FALLBACK_ENCODING` for unknown names).

    `None` when tiktoken is not installed or the encoding failed to load.
    """
    tiktoken = _module_or_none()
    if tiktoken is None:
        return None
    try:
        name: str = tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        name = FALLBACK_ENCODING
    load = _loads.get(name)
    return None if load is not None and load.failed() else name


async def count_tokens(model: str, texts: Sequence[str]) -> list[int] | None:
    """The tokens of each text by `model`'s tiktoken encoding; `None` when there is none.

    Args:
        model: The model's name.
        texts: The texts to count.
    """
    name = encoding_name(model)
    if name is None:
        return None
    encoding = await _encoding(name)
    if encoding is None:
        return None
    if sum(len(text) for text in texts) <= INLINE_CHARS:
        return _counts(encoding, texts)
    return await asyncio.to_thread(_counts, encoding, texts)


async def _encoding(name: str) -> Encoding | None:
    """The encoding `name`, loaded once per process; `None` while it cannot be had."""
    with _lock:
        load = _loads.get(name)
        if load is None:
            tiktoken = _module_or_none()
            if tiktoken is None:
                return None
            load = _loads[name] = _Load(name, tiktoken)
    future = load.future
    if not future.done():
        if load.waited_out:
            return None
        done, _ = await asyncio.wait({asyncio.wrap_future(future)}, timeout=LOAD_SECONDS)
        if not done:
            load.waited_out = True
            logger.debug(
                "tiktoken's encoding %s did not load within %s s; counting goes on without it "
                "until it does.",
                name,
                LOAD_SECONDS,
            )
            return None
    return future.result()


def _counts(encoding: Encoding, texts: Sequence[str]) -> list[int]:
    """The number of tokens of each text (special tokens' text counted as ordinary text)."""
    return [len(encoding.encode_ordinary(text)) for text in texts]
