"""Attachments on their way to a provider: checked against the policy, remote ones downloaded.

Each client says which attachments its wire takes by URL. Before a request is built,
`AttachmentGate.prepare` checks every attachment of the conversation against the client's
`AttachmentPolicy`: local paths must lie under its roots, remote URLs go on by URL where the
wire takes them, are downloaded where the policy allows, and are refused otherwise.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from glassagent._core.attachments import DEFAULT_POLICY, AttachmentPolicy
from glassagent._core.errors import AttachmentError, ConfigurationError
from glassagent._core.messages import REMOTE_SCHEMES, Attachment, Message

if TYPE_CHECKING:
    import httpx

_MAX_REDIRECTS = 5
_GENERIC_MIME = "application/octet-stream"


class AttachmentGate:
    """One client's check of the attachments it is about to send."""

    def __init__(
        self,
        policy: AttachmentPolicy | None,
        provider: str,
        by_url: Callable[[Attachment], bool],
    ) -> None:
        """Create the gate of one client.

        Args:
            policy: The client's attachment policy; `AttachmentPolicy()` when not given.
            provider: The provider's name, for errors.
            by_url: Whether the wire takes an attachment by its URL.
        """
        if policy is not None and not isinstance(policy, AttachmentPolicy):
            raise ConfigurationError(
                f"`attachment_policy` must be an AttachmentPolicy, got {type(policy).__name__}."
            )
        self.policy = policy or DEFAULT_POLICY
        self.provider = provider
        self._by_url = by_url
        # A run sends the same conversation on every model call: download each URL once.
        self._downloaded: weakref.WeakKeyDictionary[Attachment, Attachment] = (
            weakref.WeakKeyDictionary()
        )

    async def prepare(self, messages: Sequence[Message]) -> Sequence[Message]:
        """`messages` with every attachment in a form this provider can send.

        Raises:
            AttachmentError: When the policy refuses an attachment, the provider cannot take a
                URL and downloads are off, or a download fails.
        """
        if not any(m.attachments for m in messages):
            return messages
        prepared: list[Message] = []
        for message in messages:
            if message.attachments:
                ready = tuple([await self._prepare(a) for a in message.attachments])
                if any(new is not old for new, old in zip(ready, message.attachments, strict=True)):
                    message = replace(message, attachments=ready)
            prepared.append(message)
        return prepared

    async def _prepare(self, attachment: Attachment) -> Attachment:
        policy = self.policy
        if attachment.path is not None:
            real = policy.check_path(attachment.path)
            return attachment if real == attachment.path else replace(attachment, path=real)
        if attachment.url is None:
            return attachment
        if policy.remote and self._by_url(attachment):
            if not policy.allow_private_hosts:
                refuse_private_literal(attachment.url, self.provider)
            return attachment
        if not policy.download:
            raise self._refusal(attachment)
        cached = self._downloaded.get(attachment)
        if cached is None:
            data, mime = await download(attachment.url, policy, self.provider)
            if attachment.mime_type not in (None, _GENERIC_MIME) or not mime:
                mime = attachment.mime_type or _GENERIC_MIME
            cached = Attachment(data=data, mime_type=mime, name=attachment.name)
            self._downloaded[attachment] = cached
        return cached

    def _refusal(self, attachment: Attachment) -> AttachmentError:
        label = f"{attachment.name or (attachment.url or '')[:200]!r} ({attachment.mime_type})"
        if not self.policy.remote:
            why = "the attachment policy passes no URLs on"
        else:
            why = f"{self.provider} cannot take it by URL"
        return AttachmentError(
            f"Attachment {label} is a remote URL: {why}, and the policy does not allow "
            "downloading it (AttachmentPolicy(download=True)).",
            provider=self.provider,
        )


async def download(url: str, policy: AttachmentPolicy, provider: str) -> tuple[bytes, str | None]:
    """Fetch `url` within the policy's size, time and address limits.

    Returns:
        The body and the media type the server declared (without parameters), if any.

    Raises:
        AttachmentError: When the download is refused, fails, is too large or too slow.
    """
    import httpx

    label = url[:200]
    try:
        async with httpx.AsyncClient(follow_redirects=False) as client:
            return await asyncio.wait_for(
                _fetch(client, url, policy, provider), policy.download_timeout
            )
    except asyncio.TimeoutError:
        raise AttachmentError(
            f"Downloading attachment {label!r} took longer than {policy.download_timeout:g} s.",
            provider=provider,
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise AttachmentError(
            f"Could not download attachment {label!r}: {type(exc).__name__}: {exc}",
            provider=provider,
        ) from None


async def _fetch(
    client: httpx.AsyncClient, url: str, policy: AttachmentPolicy, provider: str
) -> tuple[bytes, str | None]:
    """GET `url`, following up to five redirects, each checked like the first URL."""
    import httpx

    target = httpx.URL(url)
    for _ in range(_MAX_REDIRECTS + 1):
        await _check_host(target, policy, provider)
        headers = {"Accept-Encoding": "identity"}  # a compressed body could expand past the cap
        async with client.stream("GET", target, headers=headers) as response:
            if response.is_redirect and "location" in response.headers:
                target = target.join(response.headers["location"])
                continue
            if response.status_code != 200:
                raise AttachmentError(
                    f"Downloading attachment {str(target)[:200]!r} failed with HTTP "
                    f"{response.status_code}.",
                    provider=provider,
                )
            data = await _read_capped(response, policy.max_download_bytes, provider)
            declared = response.headers.get("content-type", "").partition(";")[0].strip()
            return data, declared.lower() or None
    raise AttachmentError(
        f"Downloading attachment {url[:200]!r} was redirected more than {_MAX_REDIRECTS} times.",
        provider=provider,
    )


async def _read_capped(response: httpx.Response, limit: int, provider: str) -> bytes:
    too_big = AttachmentError(
        f"The attachment at {str(response.url)[:200]!r} is larger than max_download_bytes={limit}.",
        provider=provider,
    )
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise AttachmentError(
            f"The attachment at {str(response.url)[:200]!r} came compressed ({encoding[:40]}) "
            "although it was asked for uncompressed; it is not unpacked.",
            provider=provider,
        )
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `address` is a global one, also the IPv4 address inside an IPv6 form.

    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), 6to4 (``2002::/16``)
    and NAT64 (``64:ff9b::/96``) addresses are judged by the IPv4 address they carry.
    """
    if not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        packed = int(address)
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and (address in _NAT64 or packed >> 32 == 0):
            inner = ipaddress.IPv4Address(packed & 0xFFFFFFFF)
        if inner is not None:
            return inner.is_global
    return True


_LOCAL_NAMES = ("localhost", ".localhost", ".local", ".internal", ".home.arpa")


def refuse_private_literal(url: str, provider: str) -> None:
    """Refuse a URL passed on whose host is written as a non-public address or local name.

    The model server fetches a URL passed on, from inside the user's network, so a history
    must not point it at ``http://10.0.0.5/`` or ``http://localhost/``. Names are not
    resolved here (the server resolves them, perhaps differently); use downloads, which
    check every resolved address, where names cannot be trusted.

    Raises:
        AttachmentError: For such a URL.
    """
    import httpx

    try:
        host = httpx.URL(url).host.lower().rstrip(".")
    except (httpx.InvalidURL, ValueError):
        host = ""
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # also the forms some URL parsers accept: 2130706433, 0x7f.1, 127.1
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            address = None
    local = host == "" or host.endswith(_LOCAL_NAMES) or host == "localhost"
    if local or (address is not None and not is_public(address)):
        raise AttachmentError(
            f"Attachment {url[:200]!r} points at a non-public host; a URL passed on to "
            f"{provider} may not (AttachmentPolicy(allow_private_hosts=True) allows it).",
            provider=provider,
        )


async def _check_host(url: httpx.URL, policy: AttachmentPolicy, provider: str) -> None:
    """Refuse a URL that is not http(s), or whose host is not public (unless allowed)."""
    if url.scheme not in REMOTE_SCHEMES or not url.host:
        raise AttachmentError(
            f"Attachments are downloaded over http: and https: only, not {str(url)[:200]!r}.",
            provider=provider,
        )
    if policy.allow_private_hosts:
        return
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            url.host, port, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as exc:
        raise AttachmentError(
            f"Cannot resolve the host of attachment {str(url)[:200]!r}: {exc}", provider=provider
        ) from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
        if not is_public(address):
            raise AttachmentError(
                f"Attachment {str(url)[:200]!r} points at a non-public address ({address}); "
                "downloads reach public hosts only unless the AttachmentPolicy sets "
                "allow_private_hosts=True.",
                provider=provider,
            )
