"""The agent loop: Think (call the model) -> Act (run tools) -> Observe (send results back).

`Agent.run` returns an `AgentRun`: iterate it for events, await it for the `RunResult`.
"""

from glassagent._agent.act import ABORT_GRACE_SECONDS
from glassagent._agent.agent import Agent, AttachmentLike
from glassagent._agent.budget import Budget
from glassagent._agent.guard import estimate_tokens
from glassagent._agent.hook import OnEvent
from glassagent._agent.run import AgentRun
from glassagent._core.events import BudgetLimit
from glassagent._core.result import RunResult, RunStopReason
from glassagent._public import publish

__all__ = [
    "ABORT_GRACE_SECONDS",
    "Agent",
    "AgentRun",
    "AttachmentLike",
    "Budget",
    "BudgetLimit",
    "OnEvent",
    "RunResult",
    "RunStopReason",
    "estimate_tokens",
]

publish(__name__, globals(), __all__)
