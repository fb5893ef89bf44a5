"""Remote attachments and the attachment policy: what a history may make glassagent read."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from glassagent import Agent
from glassagent.errors import AttachmentError, UserError
from glassagent.history import AttachmentPolicy, History, HistoryAttachment, HistoryStore
from glassagent.llm import Attachment, Message, OpenAICompatibleClient
from glassagent.testing import FunctionClient

CAT = "https://example.com/img/cat.png"


def document(*urls: str, version: str = "2.0") -> bytes:
    """A stored chat whose first user message has one attachment per URL, as anyone could post."""
    history = History()
    placeholders = tuple(Attachment(data=b"x", mime_type="image/png") for _ in urls)
    history.append(Message(role="user", content="Look.", attachments=placeholders))
    history.append(Message(role="assistant", content="Seen."))
    data = history.to_dict(version)  # type: ignore[arg-type]
    messages = data["messages"] if version == "2.0" else list(data["messages"].values())
    for stored, url in zip(messages[0]["attachments"], urls, strict=True):
        stored["url"] = url
    return json.dumps(data).encode()


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """An allowed root with a file, a secret outside it, and symlinks in and out."""
    root = tmp_path / "uploads"
    root.mkdir()
    inside = root / "photo.png"
    inside.write_bytes(b"\x89PNG inside")
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG secret")
    (root / "escape.png").symlink_to(secret)
    (root / "alias.png").symlink_to(inside)
    return {"root": root, "inside": inside, "secret": secret}


# ---- the neutral Attachment with a URL --------------------------------------------------


def test_an_attachment_can_be_a_remote_url() -> None:
    attachment = Attachment.from_url("https://example.com/docs/Report%20Q1.pdf?sig=x")
    assert attachment.url == "https://example.com/docs/Report%20Q1.pdf?sig=x"
    assert (attachment.mime_type, attachment.name) == ("application/pdf", "Report Q1.pdf")
    assert Attachment(url="http://example.com/", mime_type="image/png").name is None
    with pytest.raises(AttachmentError, match="remote"):
        attachment.read_bytes()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"url": "ftp://example.com/a.png"},
        {"url": "file:///etc/passwd"},
        {"url": "https:///no-host.png"},
        {"url": CAT, "path": "a.png"},
        {"url": CAT, "data": b"x", "mime_type": "image/png"},
    ],
)
def test_an_attachment_url_must_be_http_and_alone(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        Attachment(**kwargs)


def test_a_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match="Cannot read attachment"):
        Attachment.from_path(tmp_path / "gone.png").read_bytes()
    with pytest.raises(AttachmentError, match="Cannot read attachment"):
        Attachment(path="a\0b.png").read_bytes()


@pytest.mark.parametrize("version", ["1", "2.0"])
def test_remote_attachments_round_trip_through_both_versions(version: str) -> None:
    history = History()
    history.append(Message(role="user", content="Look.", attachments=(Attachment.from_url(CAT),)))
    data = history.to_dict(version)  # type: ignore[arg-type]
    messages = data["messages"] if version == "2.0" else list(data["messages"].values())
    assert messages[0]["attachments"] == [
        {"type": "image", "mime_type": "image/png", "url": CAT, "name": "cat.png"}
    ]
    again = History.from_json(json.dumps(data))
    assert again.to_dict(version) == data  # type: ignore[arg-type]
    assert again.to_messages()[0].attachments == (Attachment.from_url(CAT),)


# ---- the policy when a history becomes model messages -----------------------------------


def test_safe_policy_sends_data_and_urls_and_reads_no_local_file(tree: dict[str, Path]) -> None:
    raw = document("data:image/png;base64,iVBORw==", CAT)
    messages = History.from_json(raw, attachment_policy=AttachmentPolicy.safe()).to_messages()
    assert messages[0].attachments[0].data == b"\x89PNG"
    assert messages[0].attachments[1] == Attachment.from_url(CAT)
    for url in (str(tree["inside"]), tree["inside"].as_uri()):
        history = History.from_json(document(url), attachment_policy=AttachmentPolicy.safe())
        with pytest.raises(AttachmentError, match="allows no local files"):
            history.to_messages()


def escapes(tree: dict[str, Path]) -> list[str]:
    root = tree["root"]
    return [
        str(tree["secret"]),  # a real file outside the root
        f"{root}/../secret.png",  # a `..` out of it
        str(root / "escape.png"),  # a symlink inside pointing outside
        (root / "escape.png").as_uri(),
        f"file://{root}/../secret.png",
        "uploads/../secret.png",  # relative to the working directory
    ]


@pytest.mark.parametrize("index", range(6))
def test_nothing_leads_outside_the_allowed_roots(
    tree: dict[str, Path], index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree["root"].parent)
    policy = AttachmentPolicy(local_roots=[tree["root"]])
    url = escapes(tree)[index]
    history = History.from_json(document(url), attachment_policy=policy)
    with pytest.raises(AttachmentError, match="outside the directories") as info:
        history.to_messages()
    if "escape" in url:  # the error does not tell where a symlink points
        assert "secret" not in str(info.value)


def test_files_under_the_roots_are_sent_by_their_resolved_path(
    tree: dict[str, Path], tmp_path: Path
) -> None:
    linked_root = tmp_path / "link-to-uploads"
    linked_root.symlink_to(tree["root"])
    policy = AttachmentPolicy(local_roots=[linked_root])  # roots are resolved too
    urls = [str(tree["inside"]), str(tree["root"] / "alias.png"), f"{linked_root}/photo.png"]
    history = History.from_json(document(*urls), attachment_policy=policy)
    attachments = history.to_messages()[0].attachments
    assert [a.path for a in attachments] == [os.path.realpath(tree["inside"])] * 3
    assert [a.name for a in attachments] == ["photo.png", "alias.png", "photo.png"]
    assert {a.read_bytes() for a in attachments} == {b"\x89PNG inside"}


def test_under_the_roots_only_regular_files_pass(tree: dict[str, Path]) -> None:
    policy = AttachmentPolicy(local_roots=[tree["root"]])
    for url in (str(tree["root"]), str(tree["root"] / "missing.png"), "a\0b"):
        with pytest.raises(AttachmentError):
            History.from_json(document(url), attachment_policy=policy).to_messages()


def test_a_policy_without_urls_refuses_them_and_other_schemes_are_refused() -> None:
    closed = AttachmentPolicy(remote=False)
    with pytest.raises(AttachmentError, match="neither passes URLs on nor downloads"):
        History.from_json(document(CAT), attachment_policy=closed).to_messages()
    downloads = replace(closed, download=True)  # a client downloads it: keep the URL
    remote = History.from_json(document(CAT), attachment_policy=downloads).to_messages()
    assert remote[0].attachments == (Attachment.from_url(CAT),)
    for url in ("gopher://example.com/x.png", "file://fileserver/share/x.png"):
        with pytest.raises(AttachmentError):
            HistoryAttachment(type="image", url=url).to_attachment()


def test_the_default_policy_keeps_paths_as_written() -> None:
    messages = History.from_json(document("uploads/map.png")).to_messages()
    assert messages[0].attachments == (Attachment(path="uploads/map.png", mime_type="image/png"),)


def test_policy_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="list of directories"):
        AttachmentPolicy(local_roots=str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(UserError):
        AttachmentPolicy(max_download_bytes=0)
    with pytest.raises(UserError):
        AttachmentPolicy(download_timeout=0)
    assert AttachmentPolicy.safe() == AttachmentPolicy(local_roots=[], download=False)
    assert AttachmentPolicy(local_roots=[tmp_path]).local_roots == (os.path.realpath(tmp_path),)


# ---- loading and running ---------------------------------------------------------------


async def test_a_run_continues_a_history_with_an_https_image() -> None:
    """The reported bug: such a chat could never be continued."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        chunk = {"choices": [{"delta": {"content": "A cat."}, "finish_reason": "stop"}]}
        stream = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:9/v1", http_client=http)
    history = History.from_json(document(CAT), attachment_policy=AttachmentPolicy.safe())
    result = await Agent(client).run("And now?", history=history, append_to_history=True)
    assert result.text == "A cat."
    assert bodies[0]["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": CAT},
    }
    assert history.thread()[0].attachments[0].url == CAT
    await http.aclose()


@pytest.mark.parametrize("index", range(6))
async def test_a_stored_untrusted_chat_cannot_make_a_run_read_a_file(
    tree: dict[str, Path], tmp_path: Path, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree["root"].parent)
    store = HistoryStore(tmp_path / "chats", attachment_policy=AttachmentPolicy.safe())
    store.path("posted").write_bytes(document(escapes(tree)[index], version="1"))
    calls: list[Any] = []
    agent = Agent(FunctionClient(lambda *request: calls.append(request) or "read it"))
    history = store.load("posted")
    assert history.attachment_policy == AttachmentPolicy.safe()
    with pytest.raises(AttachmentError):
        await agent.run("Continue.", history=history)
    assert calls == []


def test_history_load_takes_the_policy(tree: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes(document(str(tree["secret"])))
    policy = AttachmentPolicy(local_roots=[tree["root"]])
    with pytest.raises(AttachmentError, match="outside"):
        History.load(path, attachment_policy=policy).to_messages()
    assert History.load(path).to_messages()[0].attachments[0].read_bytes() == b"\x89PNG secret"
    in_memory = History(attachment_policy=AttachmentPolicy.safe())
    in_memory.append(Message(role="user", attachments=(Attachment.from_path(tree["inside"]),)))
    with pytest.raises(AttachmentError):
        in_memory.to_messages()
