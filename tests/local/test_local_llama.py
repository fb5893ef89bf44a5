"""The real llama.cpp server (xllamacpp) with a tiny generated model: its HTTP side.

The model (`tiny_gguf.py`, 27 KB, zero weights) loads in milliseconds and answers nonsense;
these tests check what a web page or another local user could reach: the API key, CORS,
the web UI.
"""

import importlib.util
from collections.abc import Iterator

import httpx
import pytest

from glassagent import Message, ModelSettings
from glassagent.local import LocalServer
from tests.local.tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason='needs "glassagent[local]"'
)

EVIL = "https://evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    model = write_tiny_gguf(tmp_path_factory.mktemp("model") / "tiny.gguf")
    with LocalServer(model, context_size=256, threads=1, startup_timeout=60) as running:
        yield running


def root(server: LocalServer) -> str:
    return server.base_url.removesuffix("/v1")


def chat_body(server: LocalServer) -> dict[str, object]:
    return {
        "model": server.model_name,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 2,
    }


def test_health_is_open_and_everything_else_needs_the_key(server: LocalServer) -> None:
    with httpx.Client(base_url=root(server), timeout=30) as http:
        assert http.get("/health").json() == {"status": "ok"}
        without = http.post("/v1/chat/completions", json=chat_body(server))
        wrong = http.post(
            "/v1/chat/completions",
            json=chat_body(server),
            headers={"Authorization": "Bearer not-the-key"},
        )
        models = http.get("/v1/models")
        keyed = http.post(
            "/v1/chat/completions",
            json=chat_body(server),
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
    assert without.status_code == wrong.status_code == 401
    assert without.json()["error"]["message"] == "Invalid API Key"
    assert models.status_code == 401
    assert keyed.status_code == 200
    assert keyed.json()["choices"][0]["message"]["role"] == "assistant"


async def test_the_clients_of_the_server_carry_the_key(server: LocalServer) -> None:
    async with server.client() as client:
        answer = await client.chat(
            [Message(role="user", content="hello")], settings=ModelSettings(max_tokens=2)
        )
        assert answer.usage.output_tokens > 0
    async with httpx.AsyncClient(base_url=root(server), timeout=30) as http:
        headers = {"Authorization": f"Bearer {server.api_key}"}
        listed = await http.get("/v1/models", headers=headers)
    assert [m["id"] for m in listed.json()["data"]] == ["tiny"]  # the alias, whole


def test_no_other_origin_may_read_answers_and_there_is_no_web_ui(server: LocalServer) -> None:
    own = root(server)
    with httpx.Client(base_url=own, timeout=30) as http:
        health = http.get("/health", headers={"Origin": EVIL})
        preflight = http.options(
            "/v1/chat/completions",
            headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"},
        )
        page = http.get("/")
    for response in (health, preflight):
        assert response.headers.get("access-control-allow-origin") in (None, own)
        assert response.headers.get("access-control-allow-credentials") in (None, "false")
    assert page.status_code == 404


def test_the_key_stays_out_of_the_server_log(server: LocalServer) -> None:
    assert server.api_key not in server.log_path.read_text(errors="replace")


def test_another_program_on_the_port_is_never_taken_for_the_server(tmp_path) -> None:
    from glassagent.local import LocalServerError
    from tests.support.loopback_server import LoopbackServer, Reply

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    healthy = Reply.body(b'{"status": "ok"}', Content_Type="application/json")
    with LoopbackServer(lambda request: healthy) as squatter:
        port = int(squatter.url.rsplit(":", 1)[1])
        server = LocalServer(model, context_size=256, threads=1, port=port, startup_timeout=60)
        with pytest.raises(LocalServerError):
            server.start()
    assert not server.running
    assert all("authorization" not in r.headers for r in squatter.requests)
