"""Database URLs in messages and reprs: their password masked."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def shown(url: str) -> str:
    """`url` with its password, if any, masked (for messages and reprs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def masked(text: str, url: str) -> str:
    """`text` with the password of `url`, if any, masked."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text
