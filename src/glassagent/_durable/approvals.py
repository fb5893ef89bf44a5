"""Durable approval: a run waits for answers in its workflow; any process gives them.

When calls of a model answer need approval, the run publishes them as the DBOS event
`APPROVALS` of its workflow and waits for messages on the topic `ANSWERS` (DBOS ``recv``):
a wait the database keeps, across restarts, for days. Any process that reaches the database
reads the waiting calls and answers with a message (DBOS ``send``, through a `DBOSClient`,
so it needs no running agent). The wait is one loop in the workflow, before the calls of
that answer start, so a resumed run replays it in the same order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from glassagent._agent.approval import Answer
from glassagent._core.errors import ConfigurationError, GlassAgentError
from glassagent._core.events import to_jsonable
from glassagent._core.messages import ToolCall
from glassagent._durable import codec
from glassagent._durable.steps import STEPS
from glassagent._durable.urls import masked, shown

if TYPE_CHECKING:
    from dbos import DBOSClient

    from glassagent._durable.steps import Replay

APPROVALS = "glassagent.approvals"
"""The workflow event holding the calls that wait for an answer (a list of `ToolCall`)."""
ANSWERS = "glassagent.approval"
"""The topic of the messages that answer them: ``{"call_id", "approved", "reason"}``."""
WAIT_SECONDS = 86_400.0
"""How long one durable wait for a message lasts; the run waits again after it."""
MAX_REASON = 4_000
"""The longest reason for a decline that the run keeps (characters)."""


async def wait_for_answers(
    replay: Replay,
    timeout: float | None,
    calls: tuple[ToolCall, ...],
    announce: Callable[[], None],
) -> dict[str, Answer]:
    """The answers to `calls`, waited for durably in the running workflow (`RunSteps`).

    `announce` is called once the calls are published as waiting. Each wait has its own
    token, which the published calls and every answer to them carry: an answer for another
    wait (a second click that came too late, say) is dropped, as is a message of another
    shape. Once `timeout` seconds have passed since the wait began (`None`: no limit; the
    time is read in recorded steps, so a replay decides the same), the calls still waiting
    are declined.
    """
    from dbos import DBOS

    wait_id = f"{replay.called}:{calls[0].id}"  # the same when a resumed run waits here again
    waiting = {call.id: call for call in calls}
    answers: dict[str, Answer] = {}
    await _publish(wait_id, waiting.values())
    announce()
    deadline = None if timeout is None else await STEPS.clock() + timeout
    while waiting:
        wait = WAIT_SECONDS
        if deadline is not None:
            wait = min(wait, deadline - await STEPS.clock())
            if wait <= 0:
                reason = f"no answer came within the approval timeout of {timeout:g} s"
                answers.update((call_id, Answer(False, reason, failed=True)) for call_id in waiting)
                break
        replay.call()
        found = answer_of(await DBOS.recv_async(ANSWERS, timeout_seconds=wait), wait_id)
        if found is None or found[0] not in waiting:
            continue
        answers[found[0]] = found[1]
        del waiting[found[0]]
        if waiting:
            await _publish(wait_id, waiting.values())
    await _publish(wait_id, ())  # nothing waits any more
    return answers


async def _publish(wait_id: str, calls: Iterable[ToolCall]) -> None:
    from dbos import DBOS

    value = {"wait": wait_id, "calls": [to_jsonable(call) for call in calls]}
    await DBOS.set_event_async(APPROVALS, value)


def answer_of(message: Any, wait_id: str) -> tuple[str, Answer] | None:
    """The call id and answer a message for the wait `wait_id` carries; else `None`."""
    if not isinstance(message, dict) or message.get("wait") != wait_id:
        return None
    call_id, approved, reason = (message.get(k) for k in ("call_id", "approved", "reason"))
    if not isinstance(call_id, str) or not isinstance(approved, bool):
        return None
    if reason is not None and not isinstance(reason, str):
        return None
    return call_id, Answer(approved, (reason or "").strip()[:MAX_REASON] or None)


def stored(url: str) -> bool:
    """Whether the runs' database may hold runs: `False` for a SQLite file that is missing."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("sqlite"):
        return True
    path = unquote(parts.path)[1:]  # sqlite:///relative or sqlite:////absolute
    return path in ("", ":memory:") or Path(path).is_file()


@asynccontextmanager
async def connected(url: str, name: str) -> AsyncIterator[DBOSClient]:
    """A DBOS client on the runs' database, as application `name`; closed on leaving.

    Raises:
        ConfigurationError: When the database cannot be reached or read (password masked).
    """
    from dbos import DBOSClient, DBOSPortableJSONSerializer

    def connect() -> DBOSClient:
        return DBOSClient(
            system_database_url=url,
            application_name=name,
            serializer=DBOSPortableJSONSerializer(),
        )

    try:
        client = await asyncio.to_thread(connect)
    except Exception as exc:
        raise _unreadable(url, exc) from None
    try:
        yield client
    except GlassAgentError:
        raise
    except Exception as exc:  # the database's own errors, e.g. tables missing
        raise _unreadable(url, exc) from None
    finally:
        await asyncio.to_thread(client.destroy)


def _unreadable(url: str, exc: Exception) -> ConfigurationError:
    detail = masked(f"{type(exc).__name__}: {exc}", url).splitlines()[0]
    return ConfigurationError(f"Could not read the runs at {shown(url)}: {detail}")


async def published(client: DBOSClient, run_id: str) -> tuple[str | None, tuple[ToolCall, ...]]:
    """The wait of the run `run_id` and the calls that wait in it now."""
    return read_published(await client.get_event_async(run_id, APPROVALS, timeout_seconds=0))


def read_published(data: Any) -> tuple[str | None, tuple[ToolCall, ...]]:
    """The wait and its calls of an `APPROVALS` event value (`None` and none if not one)."""
    if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
        return None, ()
    wait_id = data.get("wait")
    return (wait_id if isinstance(wait_id, str) else None), codec.many_from(ToolCall, data["calls"])


async def waiting(client: DBOSClient, run_id: str) -> tuple[ToolCall, ...]:
    """The calls of the run `run_id` that wait for an answer now."""
    return (await published(client, run_id))[1]


async def send_answer(
    client: DBOSClient, run_id: str, call_id: str, approved: bool, reason: str | None
) -> bool:
    """Answer the call `call_id` of the run `run_id`; whether it was waiting."""
    wait_id, calls = await published(client, run_id)
    if wait_id is None or call_id not in {call.id for call in calls}:
        return False
    message = {"wait": wait_id, "call_id": call_id, "approved": approved, "reason": reason}
    await client.send_async(run_id, message, ANSWERS)
    return True
