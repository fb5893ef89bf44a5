"""Sizes of a request for a context policy: characters, and tokens by the model's tokenizer.

A client with a tokenizer (`BaseLLMClient.count_tokens`) counts each message's text once: a
run remembers each message object's size, and counts of a text are kept per tokenizer (up to
`CACHED_TEXTS` texts), so a conversation loaded again for the next turn is not counted again.
Without a tokenizer, or when it fails, the size is the agent's estimate: four characters a
token (`CHARS_PER_TOKEN`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from glassagent._agent.guard import CHARS_PER_TOKEN, request_chars

if TYPE_CHECKING:
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import Message

ESTIMATE = "estimate"
"""The tokenizer name of counts estimated at four characters a token."""

MESSAGE_OVERHEAD = 4
"""Tokens added to a tokenizer's count of a message, for the chat template's markers."""

CACHED_TEXTS = 20_000
"""Texts whose counts are kept per tokenizer, the least recently used dropped first."""

_KEPT_TOKENIZERS = 8
_counted: OrderedDict[tuple[str, str, str], OrderedDict[str, int]] = OrderedDict()


def message_text(message: Message) -> str:
    """The text of a message a tokenizer counts: content, reasoning, tool calls."""
    parts = [message.content, message.thinking or "", message.name or ""]
    for call in message.tool_calls:
        parts += [call.name, json.dumps(call.input, default=repr, separators=(",", ":"))]
    return "\n".join(part for part in parts if part)


def _texts_of(client: BaseLLMClient) -> OrderedDict[str, int]:
    """The remembered counts of the client's tokenizer (one store per tokenizer and model)."""
    key = (client.tokenizer or "", client.model, str(getattr(client, "base_url", "")))
    store = _counted.get(key)
    if store is None:
        store = _counted[key] = OrderedDict()
        while len(_counted) > _KEPT_TOKENIZERS:
            _counted.popitem(last=False)
    else:
        _counted.move_to_end(key)
    return store


class Sizer:
    """The sizes of one run's requests: ``(chars, tokens)`` of each message and text.

    ``chars`` is the guard's measure (`request_chars`); ``tokens`` is the tokenizer's count
    (plus `MESSAGE_OVERHEAD` for a message) or the estimate. `tokenizer` names what counted
    the last request.
    """

    def __init__(self, client: BaseLLMClient) -> None:
        self.client = client
        """The client whose tokenizer counts."""
        self._sizes: dict[int, tuple[Message, int, int]] = {}  # id -> (message, chars, tokens)
        self._usable = client.tokenizer is not None  # off once the tokenizer failed
        self.tokenizer: str = client.tokenizer or ESTIMATE
        """What counted the last sizes: the client's tokenizer, or `ESTIMATE`."""

    async def messages(self, messages: Sequence[Message]) -> list[tuple[int, int]]:
        """``(chars, tokens)`` of each message; each message object is measured once."""
        sizes = self._sizes
        new = [m for m in messages if id(m) not in sizes or sizes[id(m)][0] is not m]
        if new:
            unique = list({id(m): m for m in new}.values())
            counts = await self._count([message_text(m) for m in unique])
            for message, count in zip(unique, counts, strict=True):
                chars = request_chars([message], (), None)
                tokens = chars // CHARS_PER_TOKEN if count is None else count + MESSAGE_OVERHEAD
                sizes[id(message)] = (message, chars, tokens)
        return [sizes[id(m)][1:] for m in messages]

    async def text(self, text: str, chars: int | None = None) -> tuple[int, int]:
        """``(chars, tokens)`` of a text (system instructions, tool definitions).

        `chars` is its size by the guard's measure, when that is not ``len(text)``.
        """
        [count] = await self._count([text])
        chars = len(text) if chars is None else chars
        return chars, chars // CHARS_PER_TOKEN if count is None else count

    async def _count(self, texts: list[str]) -> list[int | None]:
        """The tokenizer's count of each text, remembered; `None` each where it cannot count."""
        if not self._usable or not texts:
            return [None] * len(texts)
        store = _texts_of(self.client)
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if missing:
            counts = await self.client.count_tokens(missing)
            if counts is None or len(counts) != len(missing):
                self._usable, self.tokenizer = False, ESTIMATE
                return [None] * len(texts)
            store.update(zip(missing, counts, strict=True))
        for text in texts:
            store.move_to_end(text)
        found: list[int | None] = [store[t] for t in texts]
        while len(store) > CACHED_TEXTS:
            store.popitem(last=False)
        return found
