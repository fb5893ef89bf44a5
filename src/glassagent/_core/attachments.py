"""`AttachmentPolicy`: which local files and URLs an attachment may make glassagent read or fetch.

A history document names its attachments by URL, and whoever wrote the document chose those
URLs. A policy decides what such a reference may cause: reading a local file (only under
allowed roots), passing a remote URL to a provider that fetches it, or downloading it here.
It is applied where a history becomes model messages (`History.to_messages`) and again where a
client builds its request (the clients' ``attachment_policy``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from glassagent._core.errors import AttachmentError, UserError

DEFAULT_MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
"""The largest download an `AttachmentPolicy` accepts by default (20 MiB)."""


@dataclass(frozen=True, kw_only=True)
class AttachmentPolicy:
    """What attachments may make glassagent do: read local files, pass URLs on, download.

    The default, ``AttachmentPolicy()``, is for conversations you wrote yourself: any local
    file the process can read, remote URLs passed to providers that fetch them, no downloads.
    For a history from anyone else (posted to a server, uploaded, shared), use
    `AttachmentPolicy.safe` or name the directories files may come from in `local_roots`.

    Example:
        ```python
        policy = AttachmentPolicy.safe()  # or AttachmentPolicy(local_roots=["uploads"])
        history = History.from_json(posted_body, attachment_policy=policy)
        client = OpenAICompatibleClient("gpt-4o-mini", attachment_policy=policy)
        ```
    """

    local_roots: Sequence[str | os.PathLike[str]] | None = None
    """Directories local files may be read from; `None` allows any file, ``()`` none.

    Roots and paths are compared after resolving symlinks and ``..`` (``os.path.realpath``),
    so neither a symlink nor a ``..`` leads outside. Under roots, only regular files pass.
    """
    remote: bool = True
    """Pass ``http(s):`` URLs to providers that fetch URLs themselves (the provider, not this
    process, connects to the URL's host)."""
    download: bool = False
    """Download ``http(s):`` URLs that the provider cannot take by URL (and every URL when
    `remote` is off), then send the bytes. This process connects to the URL's host: see
    `allow_private_hosts`."""
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES
    """The largest download accepted; a larger one is refused (and stopped) with an error."""
    download_timeout: float = 30.0
    """Seconds one download may take in all, redirects included."""
    allow_private_hosts: bool = False
    """Let downloads reach loopback, private, link-local and other non-public addresses.

    Off by default: a URL in a history must not make this process fetch from internal services
    (server-side request forgery). The check resolves the host before connecting; a DNS answer
    that changes between the check and the connection is not caught, so a server handling
    untrusted histories should also restrict its outgoing traffic, or keep downloads off.
    """

    def __post_init__(self) -> None:
        if self.local_roots is not None:
            if isinstance(self.local_roots, (str, bytes, os.PathLike)):
                raise UserError("`local_roots` takes a list of directories, not one path.")
            roots = tuple(_real(os.fspath(root)) for root in self.local_roots)
            object.__setattr__(self, "local_roots", roots)
        if self.max_download_bytes < 1:
            raise UserError("`max_download_bytes` must be at least 1.")
        if not self.download_timeout > 0:
            raise UserError("`download_timeout` must be a positive number of seconds.")

    @classmethod
    def safe(cls) -> AttachmentPolicy:
        """The policy for untrusted conversations: no local files, no downloads.

        Attachments with ``data:`` URLs are sent; ``http(s):`` URLs are passed to providers
        that fetch them themselves and refused by the others; local paths are refused.
        """
        return cls(local_roots=(), remote=True, download=False)

    def check_path(self, path: str) -> str:
        """The path to read for a local attachment, or an error when the policy forbids it.

        Args:
            path: The attachment's path, as written.

        Returns:
            `path` unchanged when any file is allowed; else the resolved path, which lies in
            one of `local_roots`.

        Raises:
            AttachmentError: When local files are not allowed, the path resolves outside every
                root, or it is not a regular file.
        """
        roots = self.local_roots
        if roots is None:
            return path
        if not roots:
            raise AttachmentError(
                f"Attachment {path[:200]!r} is a local file, and the attachment policy allows "
                "no local files (AttachmentPolicy.safe())."
            )
        if path.startswith(("\\\\", "//")):  # a network share: resolving it would connect
            raise AttachmentError(f"Attachment {path[:200]!r} is on a network share.")
        try:
            real = _real(path)
        except AttachmentError:
            raise AttachmentError(f"Attachment {path[:200]!r} is not a valid path.") from None
        if not any(_inside(real, os.fspath(root)) for root in roots):
            raise AttachmentError(
                f"Attachment {path[:200]!r} is outside the directories the attachment policy "
                "allows (local_roots)."
            )
        if not os.path.isfile(real):
            raise AttachmentError(f"Attachment {path[:200]!r} is not a readable regular file.")
        return real


def _real(path: str) -> str:
    """`path` absolute, with symlinks and ``..`` resolved."""
    try:
        return os.path.normcase(os.path.realpath(path))
    except (ValueError, OSError):  # a NUL byte; a symlink loop on some platforms
        raise AttachmentError(f"{path[:200]!r} is not a valid path.") from None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


DEFAULT_POLICY = AttachmentPolicy()
"""The policy used when none is given: any local file, URLs passed on, no downloads."""
