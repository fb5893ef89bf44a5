"""`ReplyStream`: a JSON tool protocol reply read as it streams in.

A protocol reply is one JSON object (``{"thought": "...", "response": "..."}`` or
``{"thought": "...", "tool_call": {...}}``, see `json_protocol`). Its ``thought`` and
``response`` strings are what a person wants to watch while the model writes them, so this
reads the reply character by character, tracking JSON strings and nesting, and hands out
the decoded text of those two top-level strings as it arrives. The complete reply is still
read by `json_protocol.read_response`; `final_deltas` then adds only what was not streamed.
"""

from __future__ import annotations

from glassagent._core.messages import LLMResponse, StreamPart, TextDelta, ThinkingDelta

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_FIELDS = ("thought", "response")


class ReplyStream:
    """Decodes the top-level ``thought`` and ``response`` strings of a reply as it streams."""

    def __init__(self) -> None:
        self.thought = ""
        """The decoded ``thought`` so far."""
        self.text = ""
        """The decoded ``response`` so far."""
        self._depth = 0
        self._in_string = False
        self._escape = ""  # an escape sequence being read, e.g. "\\u00e"
        self._high = ""  # a high surrogate waiting for its low half
        self._expect_key = False
        self._reading_key = False
        self._key: list[str] = []
        self._last_key: str | None = None
        self._field: str | None = None  # "thought" or "response" while inside its value
        self._finished = False  # the first top-level value has closed

    def feed(self, chunk: str) -> tuple[str, str]:
        """Read the next piece of the reply; return the new ``thought`` and ``response`` text.

        Only the first top-level JSON value is read, as `json_protocol.parse_reply` reads it.
        """
        out: dict[str | None, list[str]] = {"thought": [], "response": [], None: []}
        for char in chunk:
            if self._finished:
                break
            if self._in_string:
                self._string_char(char, out)
            else:
                self._structure_char(char)
        thought, text = "".join(out["thought"]), "".join(out["response"])
        self.thought += thought
        self.text += text
        return thought, text

    def _string_char(self, char: str, out: dict[str | None, list[str]]) -> None:
        if self._escape:
            self._escape += char
            decoded = self._unescape()
            if decoded is not None:
                self._escape = ""
                self._put(decoded, out, escaped=True)
        elif char == "\\":
            self._escape = char
        elif char == '"':
            self._put("", out, escaped=False)  # a high surrogate left alone stays
            self._in_string = False
            if self._reading_key:
                self._last_key = "".join(self._key)
                self._reading_key = False
            self._field = None
        else:
            self._put(char, out, escaped=False)

    def _put(self, char: str, out: dict[str | None, list[str]], *, escaped: bool) -> None:
        """Add a decoded character; surrogate escapes pair up as ``json.loads`` pairs them."""
        if self._high:
            high, self._high = self._high, ""
            if escaped and "\udc00" <= char < "\ue000":
                char = (high + char).encode("utf-16", "surrogatepass").decode("utf-16")
            else:
                self._append(high, out)
        if escaped and "\ud800" <= char < "\udc00":
            self._high = char  # wait for its low half
        elif char:
            self._append(char, out)

    def _append(self, text: str, out: dict[str | None, list[str]]) -> None:
        if self._reading_key:
            self._key.append(text)
        else:
            out[self._field].append(text)

    def _unescape(self) -> str | None:
        """The character of the escape read so far; `None` while it is incomplete."""
        sequence = self._escape
        if sequence[1] != "u":
            return _ESCAPES.get(sequence[1], sequence[1])
        if len(sequence) < 6:
            return None
        try:
            return chr(int(sequence[2:], 16))
        except ValueError:
            return ""

    def _structure_char(self, char: str) -> None:
        if char == '"':
            self._in_string = True
            self._reading_key = self._depth == 1 and self._expect_key
            self._key = []
            at_top = self._depth == 1 and not self._reading_key
            self._field = self._last_key if at_top and self._last_key in _FIELDS else None
        elif char in "{[":
            self._depth += 1
            self._expect_key = char == "{" and self._depth == 1
        elif char in "}]":
            self._depth -= 1
            self._finished = self._depth == 0
        elif self._depth == 1 and char == ",":
            self._expect_key = True
        elif self._depth == 1 and char == ":":
            self._expect_key = False


def streamed_deltas(replies: ReplyStream, chunk: str) -> list[StreamPart]:
    """The deltas of the next piece of a reply: new ``thought`` text, new ``response`` text."""
    thought, text = replies.feed(chunk)
    parts: list[StreamPart] = []
    if thought:
        parts.append(ThinkingDelta(thought))
    if text:
        parts.append(TextDelta(text))
    return parts


def final_deltas(
    response: LLMResponse, streamed_thinking: str, replies: ReplyStream | None = None
) -> list[StreamPart]:
    """The deltas a streamed protocol answer yields once complete: what was not streamed yet.

    Native thinking was streamed already (`streamed_thinking`), and so were the reply's
    ``thought`` and ``response`` as far as `replies` read them; the rest follows here.
    """
    parts: list[StreamPart] = []
    thought = (response.thinking or "")[len(streamed_thinking) :].lstrip("\n")
    text = response.text
    if replies is not None:  # what does not continue the streamed text was read otherwise
        thought = _rest(thought, replies.thought)
        text = _rest(text, replies.text)
    if thought:
        parts.append(ThinkingDelta(thought))
    if text:
        parts.append(TextDelta(text))
    return parts


def _rest(whole: str, streamed: str) -> str:
    """What of `whole` follows `streamed`; nothing when `whole` does not start with it."""
    return whole[len(streamed) :] if whole.startswith(streamed) else ""
