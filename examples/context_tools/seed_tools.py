"""The design's two context tools, `get_user_tasks` and `search_information`, for glassagent.

The design (``ai-tools-architecture.md``) lists them with their triggers:

| tool                 | gives                               | runs when                          |
|----------------------|-------------------------------------|------------------------------------|
| `get_user_tasks`     | the user's task list                | guidance seeking score >= 50       |
| `search_information` | what the workspace says on a topic  | information seeking score >= 50    |
|                      |                                     | and the message names a topic      |

Both read the message analysis (``ctx.analysis``), the user (``ctx.user_id``, from
``agent.run(host={"user_id": ...})``) and, when the model calls them, its arguments
(``ctx.arguments``); both return a `ContextResult` with a suggested role and debug notes.
Their data comes from the services in ``deps``: small in-memory stand-ins here, your
database or search index in an application.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from glassagent.tools import ContextResult, ContextTool, TurnInfo

SECRETARY_ROLE = "secretary"
"""The role both tools suggest: a precise assistant who keeps track of the user's work."""


@dataclass(frozen=True)
class Task:
    """One task of a user."""

    title: str
    due: str
    done: bool = False


@dataclass(frozen=True)
class Document:
    """One page of the workspace."""

    title: str
    text: str


@dataclass
class TaskBoard:
    """Each user's tasks (a database table in an application)."""

    tasks: dict[str, list[Task]] = field(default_factory=dict)

    async def open_tasks(self, user_id: str, limit: int) -> list[Task]:
        """The user's tasks not done yet, soonest due first."""
        await asyncio.sleep(0)  # stands for the database call
        open_ = [task for task in self.tasks.get(user_id, []) if not task.done]
        return sorted(open_, key=lambda task: task.due)[:limit]


@dataclass
class Workspace:
    """The workspace's pages, searched by words (a search index in an application)."""

    documents: list[Document] = field(default_factory=list)

    async def search(self, query: str, limit: int) -> list[Document]:
        """The pages sharing the most words with `query`, best first."""
        await asyncio.sleep(0)
        words = {word.strip(".,?!").lower() for word in query.split()}
        ranked = []
        for doc in self.documents:
            found = {w.strip(".,?!").lower() for w in f"{doc.title} {doc.text}".split()}
            if shared := len(words & found):
                ranked.append((shared, doc))
        ranked.sort(key=lambda pair: -pair[0])
        return [doc for _, doc in ranked[:limit]]


@dataclass
class Services:
    """What the tools get as ``ctx.deps``: ``agent.run(..., deps=Services(...))``."""

    tasks: TaskBoard
    workspace: Workspace


# What the model may give when it calls a tool (JSON Schema), as the design's GetDefinition().
TASKS_PARAMETERS = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "description": "How many (default: 5)"},
    },
    "required": [],
}
SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to search for"},
        "limit": {"type": "integer", "minimum": 1, "description": "How many (default: 3)"},
    },
    "required": ["query"],
}


class GetUserTasksTool(ContextTool):
    """Gets the user's task list."""

    name = "get_user_tasks"
    description = (
        "Gets the user's open tasks, soonest due first. Use it when the user asks what to "
        "do next or about their tasks."
    )
    priority = 70
    parameters = TASKS_PARAMETERS

    def relevance(self, query: str, ctx: TurnInfo[Services]) -> int:
        """The guidance seeking score: the tool runs from 50 on."""
        if ctx.analysis is None:
            return 0
        return ctx.analysis.guidance_seeking_score

    async def run(self, query: str, ctx: TurnInfo[Services]) -> ContextResult:
        """The user's open tasks, as a list for the model."""
        if ctx.user_id is None:
            return ContextResult(debug_info="no user id: run the agent with host={'user_id': ...}")
        limit = ctx.arguments.get("limit", 5)
        tasks = await ctx.deps.tasks.open_tasks(ctx.user_id, limit)
        if not tasks:
            return ContextResult(debug_info=f"no open tasks for {ctx.user_id}")
        lines = ["[Reference] The user's open tasks:"]
        lines += [f"- {task.title} (due {task.due})" for task in tasks]
        return ContextResult(
            "\n".join(lines),
            suggested_role=SECRETARY_ROLE,
            debug_info=f"Found {len(tasks)} tasks",
        )


class SearchInformationTool(ContextTool):
    """Searches the workspace for information."""

    name = "search_information"
    description = (
        "Searches the workspace's pages. Use it when the user asks about a topic the "
        "workspace may cover."
    )
    priority = 60
    parameters = SEARCH_PARAMETERS

    def relevance(self, query: str, ctx: TurnInfo[Services]) -> int:
        """The information seeking score, when the message names a topic (else 0)."""
        if ctx.analysis is None or not ctx.analysis.information_topic:
            return 0
        return ctx.analysis.information_seeking_score

    async def run(self, query: str, ctx: TurnInfo[Services]) -> ContextResult:
        """The pages on the topic: the model's ``query``, else the analysed topic."""
        topic = ctx.arguments.get("query")
        if not topic and ctx.analysis is not None:
            topic = ctx.analysis.information_topic
        if not topic:
            return ContextResult(debug_info="no topic to search for")
        found = await ctx.deps.workspace.search(topic, ctx.arguments.get("limit", 3))
        if not found:
            return ContextResult(debug_info=f"nothing on {topic!r}")
        lines = [f"[Reference] What the workspace says about {topic}:"]
        lines += [f"- {doc.title}: {doc.text}" for doc in found]
        return ContextResult(
            "\n".join(lines),
            suggested_role=SECRETARY_ROLE,
            debug_info=f"Found {len(found)} pages for {topic!r}",
        )


def sample_services() -> Services:
    """A small workspace for the examples and tests."""
    return Services(
        tasks=TaskBoard(
            {
                "alice": [
                    Task("Send the Q3 report to Bob", due="2025-10-03"),
                    Task("Book the team offsite", due="2025-10-10"),
                    Task("Renew the domain", due="2025-09-01", done=True),
                ],
            }
        ),
        workspace=Workspace(
            [
                Document("Travel policy", "Book travel through the portal; economy under 6 h."),
                Document("Expense policy", "Submit receipts within 30 days of the travel."),
                Document("Office hours", "The office is open 8:00-19:00 on weekdays."),
            ]
        ),
    )
