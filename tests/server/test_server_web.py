"""The web view's files and the chat list, in-process: headers, package data, what is served.

The page itself is driven in a real browser by test_server_browser.py.
"""

from __future__ import annotations

import re
import zipfile
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from glassagent.server import ANONYMOUS_USER, create_app, user_directory
from tests.support.server import INVOKE, echo_client, http

ROOT = Path(__file__).resolve().parents[2]
STATIC = resources.files("glassagent._server").joinpath("static")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class _Page(HTMLParser):
    """Every tag of the page with its attributes, and the text inside script and style tags."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline: list[str] = []
        self._inside: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._inside = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._inside = None

    def handle_data(self, data: str) -> None:
        if self._inside and data.strip():
            self.inline.append(data)


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def assert_secure(headers: object) -> None:
    assert headers["content-security-policy"] == CSP  # type: ignore[index]
    assert headers["x-content-type-options"] == "nosniff"  # type: ignore[index]
    assert headers["x-frame-options"] == "DENY"  # type: ignore[index]
    assert headers["referrer-policy"] == "no-referrer"  # type: ignore[index]


# ---- the page and its files ------------------------------------------------------------------


async def test_the_page_is_served_at_the_root_with_a_strict_content_security_policy() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert_secure(response.headers)
    assert "<title>glassagent</title>" in response.text


async def test_the_page_has_no_inline_script_style_or_handler_and_loads_only_its_own_files() -> (
    None
):
    async with http(create_app(model=echo_client())) as api:
        html = (await api.get("/")).text
        page = parse(html)
        assert page.inline == []
        references = []
        for tag, attrs in page.tags:
            assert not [name for name in attrs if name.startswith("on") or name == "style"], tag
            references += [attrs[name] for name in ("src", "href") if attrs.get(name)]
        assert sorted(set(references)) == [
            "/static/app.js",
            "/static/icon.svg",
            "/static/style.css",
        ]
        types = {}
        for reference in sorted(set(references)):
            response = await api.get(reference)
            assert response.status_code == 200, reference
            assert_secure(response.headers)
            types[reference] = response.headers["content-type"]
    assert types == {
        "/static/app.js": "text/javascript; charset=utf-8",
        "/static/icon.svg": "image/svg+xml",
        "/static/style.css": "text/css; charset=utf-8",
    }


@pytest.mark.parametrize(
    "path",
    [
        "/static/nothing.js",
        "/static/index.html",  # served at / only
        "/static/..%2Fweb.py",
        "/static/%2E%2E%2Fapp.py",
        "/static/../app.py",
        "/static/",
    ],
)
async def test_only_the_named_static_files_are_served(path: str) -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.get(path)
    assert response.status_code == 404
    assert "import" not in response.text


def test_the_files_load_nothing_from_another_origin() -> None:
    for name in ("index.html", "app.js", "style.css", "icon.svg"):
        text = STATIC.joinpath(name).read_text(encoding="utf-8")
        # the SVG's XML namespace is a name, not something fetched
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), name
        assert "@import" not in text, name


def test_the_script_never_parses_text_as_html() -> None:
    script = STATIC.joinpath("app.js").read_text(encoding="utf-8")
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "DOMParser",
        "createContextualFragment",
        "srcdoc",
    ):
        assert sink not in script, sink


async def test_the_page_needs_no_token_but_the_api_does() -> None:
    app = create_app(model=echo_client(), tokens={"t0ken": "alice"})
    async with http(app) as api:
        assert (await api.get("/")).status_code == 200
        assert (await api.get("/static/app.js")).status_code == 200
        assert (await api.get("/api/ai/chats")).status_code == 401
        assert (await api.post(INVOKE, json={"message": "hi"})).status_code == 401


def test_the_static_files_are_in_the_wheel(tmp_path: Path) -> None:
    wheel_builder = pytest.importorskip("hatchling.builders.wheel")
    (wheel,) = wheel_builder.WheelBuilder(str(ROOT)).build(
        directory=str(tmp_path), versions=["standard"]
    )
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("index.html", "app.js", "style.css", "icon.svg"):
        assert f"glassagent/_server/static/{name}" in names


# ---- GET /api/ai/chats: the user's stored chats -----------------------------------------------


async def test_the_chat_list_names_each_users_own_chats_sorted(tmp_path: Path) -> None:
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    app = create_app(model=echo_client(), store=tmp_path, tokens=tokens)
    async with http(app, "alice-token") as alice, http(app, "bob-token") as bob:
        assert (await alice.get("/api/ai/chats")).json() == {"chats": []}
        for chat_id in ("trip", "budget-2026"):
            body = {"message": "hi", "chat_id": chat_id, "append_to_history": True}
            assert (await alice.post(INVOKE, json=body)).status_code == 200
        body = {"message": "hi", "chat_id": "bobs", "append_to_history": True}
        assert (await bob.post(INVOKE, json=body)).status_code == 200
        alices = (await alice.get("/api/ai/chats")).json()
        bobs = (await bob.get("/api/ai/chats")).json()
    assert alices == {"chats": [{"chat_id": "budget-2026"}, {"chat_id": "trip"}]}
    assert bobs == {"chats": [{"chat_id": "bobs"}]}


async def test_the_chat_list_skips_files_that_are_not_chats(tmp_path: Path) -> None:
    directory = user_directory(tmp_path, ANONYMOUS_USER)
    directory.mkdir(parents=True)
    (directory / "notes.txt").write_text("not a chat", encoding="utf-8")
    (directory / ".hidden.json").write_text("{}", encoding="utf-8")
    async with http(create_app(model=echo_client(), store=tmp_path)) as api:
        await api.post(INVOKE, json={"message": "hi", "chat_id": "kept", "append_to_history": True})
        response = await api.get("/api/ai/chats")
    assert response.json() == {"chats": [{"chat_id": "kept"}]}


async def test_the_chat_list_needs_a_token_and_a_store(tmp_path: Path) -> None:
    async with http(create_app(model=echo_client(), store=tmp_path, tokens={"t": "a"})) as api:
        unauthorized = await api.get("/api/ai/chats")
    async with http(create_app(model=echo_client())) as api:
        storeless = await api.get("/api/ai/chats")
    assert unauthorized.status_code == 401
    assert unauthorized.json()["error"]["code"] == "unauthorized"
    assert storeless.status_code == 400
    assert storeless.json()["error"]["code"] == "no_store"
