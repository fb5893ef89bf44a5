"""`MessageAnalysis`: what an analyser read in the user's message, for the context tools."""

from __future__ import annotations

from dataclasses import dataclass

from glassagent._core.errors import UserError


@dataclass(frozen=True)
class MessageAnalysis:
    """What the user's message asks for, as a context tool's ``ctx.analysis`` sees it.

    The agent's analyser (``ContextSettings(analyzer=...)``, the keyword heuristic
    `analyze_message` unless you give your own) makes one for each run, before the context
    tools are scored; ``relevance`` usually starts from one of its scores. Subclass it to
    carry more.

    Example:
        ```python
        def relevance(self, query: str, ctx: TurnInfo) -> int:
            return ctx.analysis.guidance_seeking_score if ctx.analysis else 0
        ```
    """

    information_seeking_score: int = 0
    """0-100: how much the message asks for facts or information (``What is ...?``)."""
    guidance_seeking_score: int = 0
    """0-100: how much it asks what to do, or for advice (``What should I do next?``)."""
    information_topic: str | None = None
    """What the information asked for is about (``the refund policy``), when it says."""

    def __post_init__(self) -> None:
        """Check the values.

        Raises:
            UserError: On a score that is not an integer from 0 to 100, or a topic that is
                not a string.
        """
        for name in ("information_seeking_score", "guidance_seeking_score"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
                raise UserError(f"`{name}` must be an integer from 0 to 100, got {value!r}.")
        if self.information_topic is not None and not isinstance(self.information_topic, str):
            raise UserError("`information_topic` must be a string or None.")
