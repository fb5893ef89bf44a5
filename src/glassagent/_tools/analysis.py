"""`analyze_message`: the agent's default message analyser, a small keyword heuristic.

It reads English and Japanese. It is deliberately simple and predictable: each cue it finds
adds a fixed weight, and the rules below are all there is. For anything better (a
classifier, a model call), give your own analyser: ``ContextSettings(analyzer=...)``.
"""

from __future__ import annotations

import re

from glassagent._core.analysis import MessageAnalysis

STRONG_CUE = 60
"""What a strong cue adds to a score: one is enough to reach the default threshold, 50."""
WEAK_CUE = 20
"""What a weak cue adds: two of them (a question word and a ``?``) stay under 50."""

_MAX_TOPIC = 80


def _cues(english: str, japanese: str = "") -> re.Pattern[str]:
    """One pattern for `|`-separated English words and phrases and Japanese fragments."""
    words = "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in english.split("|") if w)
    fragments = "|".join(re.escape(f) for f in japanese.split("|") if f)
    parts = ([rf"\b(?:{words})\b"] if words else []) + ([fragments] if fragments else [])
    return re.compile("|".join(parts), re.IGNORECASE)


_INFORMATION_STRONG = _cues(
    "what is|what are|what's|who is|who are|where is|where are|when is|when are|when does|"
    "how does|how do i|how to|why|explain|tell me about|information|info|look up|search|"
    "find|documentation|docs",
    "教えて|とは|について|調べ|検索|探して|知りたい|情報|どこ|いつ|誰|なぜ|どうやって",
)
# \uff1f: the full-width question mark
_INFORMATION_WEAK = _cues("what|which|who|where|when|how", "?|\uff1f|何|なに")
_GUIDANCE_STRONG = _cues(
    "should i|what do i|what to do|next step|next|todo|to-do|to do|task|tasks|priority|"
    "priorities|prioritize|plan|advice|advise|recommend|help me|where do i start|how should",
    "どうすれば|何をすれば|何から|次に|次は|タスク|やること|優先|おすすめ|アドバイス|手伝|"
    "困って|予定",
)
_GUIDANCE_WEAK = _cues("help|first|today", "今日|まず")

_TOPIC_PATTERNS = (
    re.compile(r"\b(?:about|regarding|concerning)\s+(.+)", re.IGNORECASE),
    re.compile(r"\b(?:search(?:\s+for)?|look\s+up|look\s+for|find)\s+(.+)", re.IGNORECASE),
    re.compile(r"\b(?:what|who|where)(?:\s+(?:is|are|was|were)|'s)\s+(.+)", re.IGNORECASE),
    re.compile(r"\bhow\s+(?:do\s+i|can\s+i|to|does)\s+(.+)", re.IGNORECASE),
    re.compile(r"(.+?)(?:について|とは|を調べ|を検索|を探|の情報)"),
    re.compile(r"(.+?)(?:は|って)(?:何|なに|どこ|いつ|誰)"),
)
_TOPIC_END = re.compile("[?\uff1f!\uff01。.,、]")  # ? and ! also full-width
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


def _score(text: str, strong: re.Pattern[str], weak: re.Pattern[str]) -> int:
    """`STRONG_CUE` for each distinct strong cue, `WEAK_CUE` for each weak one; at most 100."""
    found_strong = {" ".join(m.group(0).lower().split()) for m in strong.finditer(text)}
    found_weak = {" ".join(m.group(0).lower().split()) for m in weak.finditer(text)}
    return min(100, STRONG_CUE * len(found_strong) + WEAK_CUE * len(found_weak))


def _topic(text: str) -> str | None:
    for pattern in _TOPIC_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        topic = _TOPIC_END.split(match.group(1), maxsplit=1)[0]
        topic = _ARTICLE.sub("", " ".join(topic.split()))
        if topic:
            return topic[:_MAX_TOPIC]
    return None


def analyze_message(query: str, ctx: object = None) -> MessageAnalysis:
    """Analyse a user's message with keyword cues: the agent's default analyser.

    The rules, for English and Japanese text:

    - ``information_seeking_score``: strong cues (``what is``, ``how does``, ``tell me
      about``, ``search``, ``find``, ``docs``; ``教えて``, ``について``, ``調べ``, ``どこ``,
      ...) add 60 each, weak ones (a question word alone, ``?``) 20 each.
    - ``guidance_seeking_score``: strong cues (``should I``, ``next``, ``task``,
      ``priority``, ``plan``, ``advice``, ``help me``; ``どうすれば``, ``次に``, ``タスク``,
      ``優先``, ...) add 60 each, weak ones (``help``, ``first``, ``today``; ``まず``,
      ``今日``) 20 each.
    - ``information_topic``: the words after ``about``, ``search for``, ``look up``,
      ``find``, ``what is`` or ``how do I`` (``the`` dropped), or before ``について``, ``とは``,
      ``を調べ``, ``を検索``, ``は何``, ``はどこ``, ... up to the end of the sentence (80
      characters at most); `None` when none of these is there.

    Each distinct cue counts once; a score is at most 100.

    Example:
        ```python
        analyze_message("What is the refund policy?")
        # MessageAnalysis(information_seeking_score=100, guidance_seeking_score=0,
        #                 information_topic='refund policy')
        ```

    Args:
        query: The user's message.
        ctx: The turn (unused; there so the function is a `MessageAnalyzer`).
    """
    return MessageAnalysis(
        information_seeking_score=_score(query, _INFORMATION_STRONG, _INFORMATION_WEAK),
        guidance_seeking_score=_score(query, _GUIDANCE_STRONG, _GUIDANCE_WEAK),
        information_topic=_topic(query),
    )
