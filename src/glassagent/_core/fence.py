"""The Markdown code fence models wrap JSON in, for every reader of model replies."""

from __future__ import annotations

import re

CODE_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
"""A Markdown code fence (its language tag optional); group 1 is its content."""
