"""The invoke server closed to other web sites: token, Host and Origin checks, limits.

Each of these would have failed before: a cross-site ``fetch(url, {method: "POST", mode:
"no-cors"})`` with a text/plain body ran a turn whose ``write_file`` wrote into the
workspace, and so did a page under another name resolving to 127.0.0.1 (DNS rebinding).
The fast checks run the app in-process (httpx.ASGITransport); one runs ``glassagent serve``
as a real process, as a user starts it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import glassagent.cli
from glassagent import LLMResponse, ToolCall
from glassagent.errors import ConfigurationError, UserError
from glassagent.server import InvokeRequest, ServerLimits, create_app, invoke
from glassagent.testing import FunctionClient, ScriptedClient
from glassagent.workspace import Workspace
from tests.support.cli import ScriptedModel, call, cli_env, say
from tests.support.server import INVOKE, LAUNCH_LINE, echo_client, http, served_with_token

TOKEN = "launch-token-of-this-test"
JSON = {"Content-Type": "application/json"}
BODY = json.dumps({"message": "Write pwned.txt."})
#: what ``fetch(url, {method: "POST", mode: "no-cors", body})`` sends from another site
NO_CORS = {
    "Content-Type": "text/plain;charset=UTF-8",
    "Origin": "http://evil.example",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "no-cors",
}


def writer(tmp_path: Path) -> tuple[ScriptedClient, Workspace]:
    """A model whose first answer writes ``pwned.txt`` into a workspace in `tmp_path`."""
    model = ScriptedClient(
        [
            LLMResponse(
                tool_calls=[ToolCall("c1", "write_file", {"path": "pwned.txt", "content": "x"})]
            ),
            "Written.",
        ]
    )
    return model, Workspace(tmp_path / "project")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


# ---- cross-site requests: no turn, no file -------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        NO_CORS,
        {"Content-Type": "text/plain"},  # an old browser: no Origin, no Sec-Fetch-Site
        {"Content-Type": "application/x-www-form-urlencoded", "Origin": "null"},  # a form
        {**JSON, "Origin": "http://evil.example"},
        {**JSON, "Sec-Fetch-Site": "cross-site"},
        {**JSON, "Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"},
        {**JSON, "Host": "attacker.example:8000", "Origin": "http://attacker.example:8000"},
        {},  # no Content-Type at all
    ],
    ids=["no-cors", "text-plain", "form", "origin", "fetch-site", "other-port", "rebind", "none"],
)
@pytest.mark.parametrize("access_token", [None, TOKEN], ids=["no-token", "token"])
async def test_a_request_a_web_page_could_send_runs_nothing(
    project: Path, headers: dict[str, str], access_token: str | None
) -> None:
    model, workspace = writer(project.parent)
    app = create_app(model=model, tools=workspace.tools, access_token=access_token)
    async with http(app, access_token) as api:
        response = await api.post(INVOKE, content=BODY, headers=headers)
    assert response.status_code in (403, 415), response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.json()["error"]["code"] in (
        "cross_site",
        "forbidden_host",
        "unsupported_media_type",
    )
    assert model.requests == []
    assert not (project / "pwned.txt").exists()


async def test_the_same_request_as_json_from_a_program_runs_the_turn(project: Path) -> None:
    """The control: the refused requests above would have written the file."""
    model, workspace = writer(project.parent)
    app = create_app(model=model, tools=workspace.tools, access_token=TOKEN)
    async with http(app, TOKEN) as api:
        response = await api.post(INVOKE, content=BODY, headers=JSON)
    assert response.status_code == 200, response.text
    assert (project / "pwned.txt").read_text() == "x"


# ---- Host ---------------------------------------------------------------------------------


HOSTS_REFUSED = [
    "attacker.example",
    "attacker.example:8000",
    "127.0.0.1.nip.io:8000",
    "localhost.attacker.example",
    "192.0.2.7:8000",
    "",
]
HOSTS_TAKEN = ["127.0.0.1:8000", "localhost:8000", "LocalHost", "127.9.8.7", "[::1]:8000", "[::1]"]


@pytest.mark.parametrize("host", HOSTS_REFUSED)
async def test_a_host_that_is_not_this_machine_gets_403(host: str) -> None:
    model = echo_client()
    async with http(create_app(model=model)) as api:
        response = await api.post(INVOKE, json={"message": "x"}, headers={"Host": host})
        health = await api.get("/api/ai/health", headers={"Host": host})
    assert response.status_code == health.status_code == 403
    assert response.json()["error"]["code"] == "forbidden_host"
    assert model.requests == []


@pytest.mark.parametrize("host", HOSTS_TAKEN)
async def test_loopback_hosts_with_any_port_are_served(host: str) -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, json={"message": "x"}, headers={"Host": host})
    assert response.status_code == 200, response.text


async def test_the_address_a_request_came_to_and_allowed_hosts_are_served() -> None:
    app = create_app(model=echo_client(), allowed_hosts=["Agent.Example.com"])
    transport = httpx.ASGITransport(app=app)  # as if reached at 192.0.2.10 on the network
    async with httpx.AsyncClient(transport=transport, base_url="http://192.0.2.10:8000") as api:
        own = await api.get("/api/ai/health")
        named = await api.get("/api/ai/health", headers={"Host": "agent.example.com"})
        other = await api.get("/api/ai/health", headers={"Host": "192.0.2.11:8000"})
        sub = await api.get("/api/ai/health", headers={"Host": "x.agent.example.com"})
    assert (own.status_code, named.status_code) == (200, 200)
    assert (other.status_code, sub.status_code) == (403, 403)
    app = create_app(model=echo_client(), allowed_hosts=["*"], access_token=TOKEN)
    async with http(app) as api:
        anything = await api.get("/api/ai/health", headers={"Host": "anything.example"})
    assert anything.status_code == 200


def test_any_host_needs_a_token() -> None:
    # DNS rebinding: a page of rebind.example (now 127.0.0.1) is its own origin, so only
    # the Host check could stop it; with any host allowed, a token must.
    with pytest.raises(ConfigurationError, match="needs tokens"):
        create_app(model=echo_client(), allowed_hosts=["*"])


async def test_a_websocket_is_refused_before_any_route() -> None:
    app = create_app(model=echo_client())
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/api/ai/invoke", "headers": [(b"host", b"evil.example")]}
    await app(scope, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}]


# ---- Origin and Sec-Fetch-Site --------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "http://127.0.0.1:8000", "Sec-Fetch-Site": "same-origin"}, 200),
        ({"Sec-Fetch-Site": "same-origin"}, 200),
        ({"Sec-Fetch-Site": "none"}, 200),  # typed in the address bar
        ({"Origin": "http://127.0.0.1:8001"}, 403),
        ({"Origin": "https://127.0.0.1"}, 403),
        ({"Origin": "null"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Origin": "http://localhost:3000", "Sec-Fetch-Site": "cross-site"}, 200),  # allowed
        ({"Origin": "http://localhost:3001", "Sec-Fetch-Site": "cross-site"}, 403),
    ],
)
async def test_origins_other_than_the_requests_own_are_refused_unless_allowed(
    headers: dict[str, str], status: int
) -> None:
    app = create_app(model=echo_client(), allowed_origins=["HTTP://localhost:3000/"])
    async with http(app) as api:
        response = await api.post(INVOKE, json={"message": "x"}, headers=headers)
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
        ("text/plain", 415),
        ("application/jsonx", 415),
        ("multipart/form-data; boundary=x", 415),
    ],
)
async def test_a_post_must_be_json(content_type: str, status: int) -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, content=BODY, headers={"Content-Type": content_type})
    assert response.status_code == status
    if status == 415:
        assert response.json()["error"]["code"] == "unsupported_media_type"


# ---- the token: header, address, cookie ----------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
async def test_without_the_launch_token_a_request_gets_401(header: str | None) -> None:
    model = echo_client()
    app = create_app(model=model, access_token=TOKEN)
    headers = {"Authorization": header} if header is not None else {}
    async with http(app) as api:
        invoked = await api.post(INVOKE, json={"message": "x"}, headers=headers)
        listed = await api.get("/api/ai/chats", headers=headers)
        right = await api.post(
            INVOKE, json={"message": "x"}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert invoked.status_code == listed.status_code == 401
    assert right.status_code == 200
    assert len(model.requests) == 1


async def test_the_address_with_the_token_sets_a_strict_httponly_cookie(tmp_path: Path) -> None:
    app = create_app(model=echo_client(), store=tmp_path, access_token=TOKEN)
    async with http(app) as api:
        signed = await api.get(f"/?token={TOKEN}")
        api.cookies.clear()  # sent by hand below
        cookie = signed.headers["set-cookie"]
        name, _, value = cookie.partition(";")[0].partition("=")
        with_cookie = await api.get("/api/ai/chats", headers={"Cookie": f"{name}={value}"})
        other_port = await api.get(
            "/api/ai/chats", headers={"Cookie": f"glassagent-token-9000={value}"}
        )
        cross_site = await api.get(
            "/api/ai/chats", headers={"Cookie": f"{name}={value}", "Sec-Fetch-Site": "same-site"}
        )
        wrong = await api.get("/?token=not-it", follow_redirects=False)
        page = await api.get("/")
    assert signed.status_code == 303
    assert signed.headers["location"] == "/"
    assert name == "glassagent-token-8000"  # the port: a browser shares cookies among ports
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert "secure" not in attributes  # plain http on loopback
    assert TOKEN not in cookie
    assert with_cookie.status_code == 200
    assert with_cookie.json() == {"chats": []}
    assert other_port.status_code == 401
    assert cross_site.status_code == 403
    assert wrong.status_code == 401
    assert "set-cookie" not in wrong.headers
    assert page.status_code == 200  # the page itself needs no token


async def test_each_user_signs_in_with_their_token_and_the_header_wins_over_the_cookie(
    tmp_path: Path,
) -> None:
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    app = create_app(model=echo_client(), store=tmp_path, tokens=tokens)
    async with http(app) as api:
        await api.get("/?token=alice-token")  # 303; the client keeps the cookie
        body = {"message": "x", "chat_id": "mine", "append_to_history": True}
        assert (await api.post(INVOKE, json=body)).status_code == 200
        alice = (await api.get("/api/ai/chats")).json()
        bob = await api.get("/api/ai/chats", headers={"Authorization": "Bearer bob-token"})
        wrong = await api.get("/api/ai/chats", headers={"Authorization": "Bearer nobody"})
    assert alice == {"chats": [{"chat_id": "mine"}]}
    assert bob.json() == {"chats": []}
    assert wrong.status_code == 401


def test_create_app_checks_the_token_and_the_allowed_names() -> None:
    model = echo_client()
    with pytest.raises(ConfigurationError, match="not both"):
        create_app(model=model, tokens={"t": "a"}, access_token=TOKEN)
    for bad in ("", " padded ", 42):
        with pytest.raises(ConfigurationError):
            create_app(model=model, access_token=bad)  # type: ignore[arg-type]
    for host in ("agent.example.com:8000", "http://agent.example.com", "a/b", "[::1]:80", ""):
        with pytest.raises(ConfigurationError, match="host"):
            create_app(model=model, allowed_hosts=[host])
    for origin in ("*", "agent.example.com", "https://a.example/path", "null"):
        with pytest.raises(ConfigurationError, match="origin"):
            create_app(model=model, allowed_origins=[origin])


# ---- bounded answers, nosniff, the load --------------------------------------------------


async def test_a_422_lists_the_first_20_problems_and_counts_them_all() -> None:
    params = {f"unknown_{n:06d}": n for n in range(40_000)}  # a body of about 0.8 MB
    body = json.dumps({"message": "x", "params": params})
    assert 700_000 < len(body) < 1024 * 1024
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, content=body, headers=JSON)
    assert response.status_code == 422
    error = response.json()["error"]
    assert len(error["problems"]) == 20
    assert error["problem_count"] == 40_000
    assert error["problems"][0]["location"] == "params.unknown_000000"
    assert len(response.content) < 10_000  # was 8.6 MB for a body of this size


async def test_every_answer_says_nosniff(tmp_path: Path) -> None:
    app = create_app(model=echo_client(), store=tmp_path, access_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with http(app) as api:
        answers = [
            await api.post(INVOKE, json={"message": "x"}, headers=auth),
            await api.post(INVOKE, json={"message": "x", "stream": True}, headers=auth),
            await api.post(INVOKE, json={"message": 1}, headers=auth),
            await api.post(INVOKE, json={"message": "x"}),
            await api.get("/api/ai/chats/none", headers=auth),
            await api.get("/api/ai/health"),
            await api.get("/api/ai/nothing-here"),
            await api.put(INVOKE, json={}),
            await api.get("/"),
            await api.get(f"/?token={TOKEN}", follow_redirects=False),
            await api.get("/static/app.js"),
        ]
    statuses = [a.status_code for a in answers]
    assert statuses == [200, 200, 422, 401, 404, 200, 404, 405, 200, 303, 200]
    assert [a.headers.get_list("x-content-type-options") for a in answers] == [["nosniff"]] * 11


async def test_requests_beyond_the_concurrency_limit_get_503_with_retry_after() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(*_: Any) -> str:
        entered.set()
        await asyncio.wait_for(release.wait(), 10)
        return "done"

    limits = ServerLimits(max_concurrent_requests=1)
    async with http(create_app(model=FunctionClient(held), limits=limits)) as api:
        first = asyncio.create_task(api.post(INVOKE, json={"message": "x"}))
        await asyncio.wait_for(entered.wait(), 10)
        busy = await api.get("/api/ai/health")
        release.set()
        assert (await first).status_code == 200
        after = await api.get("/api/ai/health")
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["code"] == "busy"
    assert after.status_code == 200


@pytest.mark.parametrize("pause", [0.5, 0.08], ids=["idle", "deadline"])
async def test_a_slow_body_gets_408(pause: float) -> None:
    """A pause of 0.5 s trips the idle limit (0.2 s); pieces every 0.08 s, the deadline."""
    model = echo_client()
    limits = ServerLimits(body_timeout=0.4, body_idle_timeout=0.2)

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"message": "'
        for _ in range(20):
            await asyncio.sleep(pause)
            yield b"x"
        yield b'"}'

    async with http(create_app(model=model, limits=limits)) as api:
        started = asyncio.get_running_loop().time()
        response = await api.post(INVOKE, content=trickle(), headers=JSON)
        elapsed = asyncio.get_running_loop().time() - started
        again = await api.post(INVOKE, json={"message": "x"})
    assert response.status_code == 408
    assert response.json()["error"]["code"] == "body_timeout"
    assert response.headers["connection"] == "close"
    assert elapsed < 1.0
    assert model.requests[0].messages[-1].content == "x"  # only the second reached the model
    assert again.status_code == 200


# ---- typed errors for wrongly typed calls -------------------------------------------------


async def test_wrongly_typed_calls_raise_the_projects_errors() -> None:
    with pytest.raises(UserError, match="run_timeout"):
        ServerLimits(run_timeout="5")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="body_timeout"):
        ServerLimits(body_timeout=0)
    with pytest.raises(UserError, match="max_connections"):
        ServerLimits(max_connections=True)
    with pytest.raises(UserError, match="InvokeRequest"):
        await invoke({"message": "x"}, clients=echo_client())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="bytes or a string"):
        InvokeRequest.from_json(None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="ServerLimits"):
        InvokeRequest.from_dict({"message": "x"}, {"max_iterations": 3})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="ServerLimits"):
        create_app(model=echo_client(), limits={"max_iterations": 3})  # type: ignore[arg-type]


# ---- glassagent serve: the launch token, as a real process ---------------------------------


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[str, str, ScriptedModel, subprocess.Popen[str]]]:
    """``glassagent serve --workspace`` without --tokens: its address and launch token."""
    (tmp_path / "project").mkdir()
    script = (call(("write_file", {"path": "pwned.txt", "content": "x"})), say("Written."))
    with ScriptedModel(*script) as model:
        arguments = [*model.args(), "--port", "0", "--workspace", str(tmp_path / "project")]
        with served_with_token(arguments, tmp_path, cli_env()) as (address, token, process):
            yield address, token, model, process


def test_serve_makes_a_token_at_start_and_prints_the_address_that_carries_it(
    launched: tuple[str, str, ScriptedModel, subprocess.Popen[str]], tmp_path: Path
) -> None:
    address, token, model, process = launched
    project = tmp_path / "project"
    with httpx.Client(base_url=address, timeout=30) as client:
        attacks = [
            client.post(INVOKE, content=BODY, headers=NO_CORS),
            client.post(INVOKE, content=BODY, headers={**JSON, "Host": "attacker.example:80"}),
            client.post(INVOKE, content=BODY, headers=JSON),  # no token
            client.post(INVOKE, content=BODY, headers={**JSON, "Authorization": "Bearer no"}),
        ]
        assert [a.status_code for a in attacks] == [403, 403, 401, 401]
        assert model.requests == []
        assert not (project / "pwned.txt").exists()
        signed = client.get(f"/?token={token}")
        assert signed.status_code == 303
        port = address.rsplit(":", 1)[1]
        assert signed.headers["set-cookie"].startswith(f"glassagent-token-{port}=")
        answer = client.post(INVOKE, content=BODY, headers=JSON)  # the cookie alone
        assert answer.status_code == 200, answer.text
    assert (project / "pwned.txt").read_text() == "x"
    process.terminate()
    assert process.wait(15) == 0
    assert process.stderr is not None
    assert token not in process.stderr.read()
    access = (tmp_path / "access.log").read_text()
    assert '"GET /?token=[hidden] HTTP/1.1" 303' in access
    assert token not in access


def test_serve_without_tokens_prints_the_token_line_and_no_token_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served: list[Any] = []

    async def started_at_once(app: Any, *, host: str, port: int, on_started: Any) -> None:
        served.append(app)
        on_started(f"http://{host}:4321")

    monkeypatch.setattr("glassagent.cli._serve.aserve", started_at_once)
    args = ["serve", "--provider", "openai_compatible", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--port", "0"]  # fmt: skip
    assert glassagent.cli.main(args) == 0
    err = capsys.readouterr().err
    match = LAUNCH_LINE.search(err)
    assert match is not None, err
    assert "WARNING" not in err
    assert len(served[0].state.glassagent.tokens) == 1  # that one token, for the anonymous user
    assert glassagent.cli.main([*args, "--no-token"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: --no-token" in err
    assert "Any program or user of this machine can drive the agent" in err
    assert "open http://127.0.0.1:4321/ in a browser (no token)" in err
    assert "?token=" not in err
    assert served[1].state.glassagent.tokens is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--no-token", "--host", "0.0.0.0"], "Refusing to serve on '0.0.0.0' without tokens"),
        (["--host", "0.0.0.0"], "Refusing to serve on '0.0.0.0' without tokens"),
        (["--no-token", "--tokens", "{tokens}"], "--no-token and --tokens exclude each other"),
        (["--allowed-host", "agent.example.com:443"], "without scheme, port or path"),
        (["--allowed-origin", "agent.example.com"], "is not an origin"),
        (["--no-token", "--allowed-host", "*"], "--allowed-host '*' needs a token"),
    ],
)
def test_serve_refuses_what_cannot_be_safe(
    extra: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"a-token-of-alice": "alice"}')
    args = ["serve", "--provider", "openai_compatible", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--port", "0", *(e.format(tokens=tokens) for e in extra)]  # fmt: skip
    assert glassagent.cli.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err
