"""Sizes of a request for a context policy: characters, and tokens by the model's tokenizer.

A client with a tokenizer (`BaseLLMClient.count_tokens`) counts what a policy's decision
needs: the newest messages, back to where they fill the window, and the messages always
sent; older messages get the estimate, as they are left out either way. A run remembers
each message object's size, and the counts of texts are kept for the process by a digest of
the text, never the text (`CACHED_TEXTS` in all), so a conversation loaded again for the
next turn is not counted again. Without a tokenizer, or when it fails, the size is the
agent's estimate: four characters a token (`CHARS_PER_TOKEN`).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from glassagent._agent.guard import CHARS_PER_TOKEN, request_chars

if TYPE_CHECKING:
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import Message

ESTIMATE = "estimate"
"""The tokenizer name of counts estimated at four characters a token."""

MESSAGE_OVERHEAD = 4
"""Tokens added to a tokenizer's count of a message, for the chat template's markers."""

CACHED_TEXTS = 50_000
"""Counts kept for the process, of all tokenizers together, the least recently used dropped
first. Each is kept by a 16-byte digest of the tokenizer and the text (about 200 bytes an
entry, 10 MB at most)."""

_counted: OrderedDict[bytes, int] = OrderedDict()


def message_text(message: Message) -> str:
    """The text of a message a tokenizer counts: content, reasoning, tool calls."""
    parts = [message.content, message.thinking or "", message.name or ""]
    for call in message.tool_calls:
        parts += [call.name, json.dumps(call.input, default=repr, separators=(",", ":"))]
    return "\n".join(part for part in parts if part)


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate from JSON is still text


@dataclass
class _Size:
    """One message's size in a run."""

    message: Message
    chars: int
    tokens: int
    counted: bool = False
    """Whether a tokenizer counted `tokens` (else they are the estimate)."""
    digest: bytes | None = None


class Sizer:
    """The sizes of one run's requests: ``(chars, tokens)`` of each message and text.

    ``chars`` is the guard's measure (`request_chars`); ``tokens`` is the tokenizer's count
    (plus `MESSAGE_OVERHEAD` for a message) or the estimate. `tokenizer` names what counted
    the last request.
    """

    def __init__(self, client: BaseLLMClient) -> None:
        self.client = client
        """The client whose tokenizer counts."""
        self._sizes: dict[int, _Size] = {}  # by id of the message
        self._usable = client.tokenizer is not None  # off once the tokenizer failed
        self.tokenizer: str = client.tokenizer or ESTIMATE
        """What counted the last sizes: the client's tokenizer, or `ESTIMATE`."""
        tokenizer = (client.tokenizer or "", client.model, str(getattr(client, "base_url", "")))
        self._key = hashlib.blake2b(_encoded(repr(tokenizer)), digest_size=32).digest()

    async def messages(
        self,
        messages: Sequence[Message],
        *,
        enough: int | None = None,
        exact: Collection[int] = (),
    ) -> list[tuple[int, int]]:
        """``(chars, tokens)`` of each message; each message object is measured once.

        Args:
            messages: The messages, oldest first.
            enough: Count only the newest messages, back to the first whose tokens and the
                newer ones' pass `enough`; the older ones get the estimate. `None`: all.
            exact: Positions in `messages` counted in any case.
        """
        sizes = [self._size(m) for m in messages]
        scale = 1
        while self._usable:
            wanted = [i for i in exact if not self._known(sizes[i])]
            if enough is None:
                wanted += [i for i, size in enumerate(sizes) if not self._known(size)]
            else:
                wanted += self._newest(sizes, enough)
                if wanted and scale > 1:  # counts below the estimate: reach further at once
                    wanted += self._newest(sizes, enough * scale)
            if not wanted:
                break
            await self._count_messages([sizes[i] for i in sorted(set(wanted))])
            scale *= 2
        return [(size.chars, size.tokens) for size in sizes]

    def _size(self, message: Message) -> _Size:
        """The run's size of `message`: counted, or estimated for now."""
        size = self._sizes.get(id(message))
        if size is None or size.message is not message:
            chars = request_chars([message], (), None)
            size = self._sizes[id(message)] = _Size(message, chars, chars // CHARS_PER_TOKEN)
        return size

    def _known(self, size: _Size) -> bool:
        """Whether `size` is final: counted, found in the counts kept, or not countable."""
        if size.counted or not self._usable:
            return True
        if size.digest is None:
            size.digest = self._digest(message_text(size.message))
        count = _counted.get(size.digest)
        if count is None:
            return False
        _counted.move_to_end(size.digest)
        size.tokens, size.counted = count + MESSAGE_OVERHEAD, True
        return True

    def _newest(self, sizes: list[_Size], enough: int) -> list[int]:
        """The positions not counted yet among the newest messages that pass `enough`."""
        wanted, total = [], 0
        for i in range(len(sizes) - 1, -1, -1):
            if total > enough:
                break
            if not self._known(sizes[i]):
                wanted.append(i)
            total += sizes[i].tokens
        return wanted

    async def _count_messages(self, sizes: list[_Size]) -> None:
        texts = [message_text(size.message) for size in sizes]
        digests = [
            size.digest or self._digest(text) for size, text in zip(sizes, texts, strict=True)
        ]
        counts = await self._count(texts, digests)
        for size, count in zip(sizes, counts, strict=True):
            if count is not None:
                size.tokens, size.counted = count + MESSAGE_OVERHEAD, True

    async def text(self, text: str, chars: int | None = None) -> tuple[int, int]:
        """``(chars, tokens)`` of a text (system instructions, tool definitions).

        `chars` is its size by the guard's measure, when that is not ``len(text)``.
        """
        [count] = await self._count([text])
        chars = len(text) if chars is None else chars
        return chars, chars // CHARS_PER_TOKEN if count is None else count

    def _digest(self, text: str) -> bytes:
        """The key of a text's count: its digest, keyed by the tokenizer."""
        return hashlib.blake2b(_encoded(text), digest_size=16, key=self._key).digest()

    async def _count(
        self, texts: list[str], digests: list[bytes] | None = None
    ) -> list[int | None]:
        """The tokenizer's count of each text, remembered; `None` each where it cannot count.

        `digests`: the texts' digests (`_digest`), when they are known already.
        """
        if not self._usable or not texts:
            return [None] * len(texts)
        keys = digests if digests is not None else [self._digest(text) for text in texts]
        found: dict[bytes, int] = {}
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            count = _counted.get(key)
            if count is None:
                missing[key] = text
            else:
                found[key] = count
        if missing:
            counts = await self.client.count_tokens(list(missing.values()))
            if counts is None or len(counts) != len(missing):
                self._usable, self.tokenizer = False, ESTIMATE
                return [None] * len(texts)
            found.update(zip(missing, counts, strict=True))
            _counted.update(zip(missing, counts, strict=True))
        for key in found:
            if key in _counted:  # another run may have dropped it while this one counted
                _counted.move_to_end(key)
        while len(_counted) > CACHED_TEXTS:
            _counted.popitem(last=False)
        return [found[key] for key in keys]
