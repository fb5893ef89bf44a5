"""Attachments from untrusted histories: no compression bombs, no private hosts passed on,
no network shares, malformed URLs typed."""

from __future__ import annotations

import gzip
import ipaddress
import threading
from pathlib import Path

import httpx
import pytest

from glassagent import Agent, tool
from glassagent.errors import AttachmentError
from glassagent.history import AttachmentPolicy, History
from glassagent.llm import Attachment, LLMResponse, Message, OpenAICompatibleClient, ToolCall
from glassagent.testing import FunctionClient
from tests.providers.test_attachment_policy import document
from tests.support.loopback_server import LoopbackServer, Reply

ANSWER = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}


def capturing_client(seen: list[httpx.Request], policy: AttachmentPolicy) -> OpenAICompatibleClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return OpenAICompatibleClient(
        "m", base_url="http://127.0.0.1:9/v1", api_key="", http_client=http,
        attachment_policy=policy,
    )  # fmt: skip


async def test_a_compressed_download_is_refused_not_unpacked() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)  # 5 MB from a few kB
    reply = Reply.body(bomb, Content_Type="image/png", Content_Encoding="gzip")
    policy = AttachmentPolicy(download=True, allow_private_hosts=True, max_download_bytes=100_000)
    seen: list[httpx.Request] = []
    with LoopbackServer(lambda request: reply) as server:
        client = capturing_client(seen, policy)
        pdf = Attachment(url=server.url + "/report.pdf", mime_type="application/pdf")
        with pytest.raises(AttachmentError, match="compressed"):
            await client.chat([Message(role="user", content="?", attachments=(pdf,))])
    assert server.requests[0].headers["accept-encoding"] == "identity"
    assert seen == []  # nothing reached the model


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5/x.png",
        "http://localhost:8080/x.png",
        "http://printer.local/x.png",
        "http://2130706433/x.png",  # 127.0.0.1 in decimal
        "http://0x7f.1/x.png",
        "http://[::ffff:127.0.0.1]/x.png",
        "http://[64:ff9b::a9fe:a9fe]/x.png",  # NAT64 form of 169.254.169.254
        "http://169.254.169.254/latest/meta-data.png",
    ],
)
async def test_urls_passed_on_may_not_point_at_private_hosts(url: str) -> None:
    seen: list[httpx.Request] = []
    client = capturing_client(seen, AttachmentPolicy.safe())
    image = Attachment(url=url, mime_type="image/png")
    with pytest.raises(AttachmentError, match="non-public host"):
        await client.chat([Message(role="user", content="?", attachments=(image,))])
    assert seen == []
    allowed = capturing_client(seen, AttachmentPolicy(allow_private_hosts=True))
    await allowed.chat([Message(role="user", content="?", attachments=(image,))])
    assert url in seen[0].content.decode()


async def test_a_public_url_is_still_passed_on() -> None:
    seen: list[httpx.Request] = []
    client = capturing_client(seen, AttachmentPolicy.safe())
    image = Attachment(url="https://example.com/cat.png")
    await client.chat([Message(role="user", content="?", attachments=(image,))])
    assert "https://example.com/cat.png" in seen[0].content.decode()


def test_embedded_ipv4_addresses_are_judged_by_what_they_carry() -> None:
    from glassagent._providers.attachments import is_public

    assert is_public(ipaddress.ip_address("8.8.8.8"))
    assert is_public(ipaddress.ip_address("2001:4860:4860::8888"))
    for address in ("::ffff:10.1.2.3", "2002:7f00:1::", "64:ff9b::a00:1", "::127.0.0.1"):
        assert not is_public(ipaddress.ip_address(address)), address


@pytest.mark.parametrize("url", ["http://[::1", "https://[zz]/a.png", "https://host:port/a.png"])
def test_a_malformed_url_in_a_history_is_a_typed_error(url: str) -> None:
    history = History.from_json(document(url), attachment_policy=AttachmentPolicy.safe())
    with pytest.raises(AttachmentError):
        history.to_messages()


@pytest.mark.parametrize("path", ["//server/share/a.png", "\\\\server\\share\\a.png"])
def test_network_share_paths_are_refused_before_they_are_resolved(
    path: str, tmp_path: Path
) -> None:
    policy = AttachmentPolicy(local_roots=(tmp_path,))
    with pytest.raises(AttachmentError, match="network share"):
        policy.check_path(path)


async def test_a_generator_tool_runs_on_its_worker_thread() -> None:
    @tool
    def where() -> object:
        """Say which thread runs the tool's body."""
        yield threading.current_thread().name

    def model(messages, tools, system, settings):
        if messages[-1].role == "tool":
            return messages[-1].content
        return LLMResponse(tool_calls=(ToolCall("c1", "where", {}),))

    result = await Agent(FunctionClient(model), [where]).run("where?")
    assert "glassagent-tool-where" in result.text
