"""Durable runs: a run survives a crash and resumes; needs ``pip install "glassagent[durable]"``.

`DurableAgent` wraps an `Agent`. ``async with durable:`` starts DBOS (the durable execution
library) on a database, SQLite by default, and resumes the runs a crash left pending.
``await durable.run(prompt, run_id=...)`` runs the agent as a DBOS workflow whose id is the
run id; ``await durable.result(run_id)`` waits for a run by id, wherever it runs;
``await durable.runs()`` lists the runs with their status (`DurableRun`). Every model call and
every tool call is a step kept in the database once done: after a crash, a resumed run sends
no finished model call again and runs no finished tool call again. The call in flight at the
crash runs again (at least once), so a tool passes ``ctx.idempotency_key`` to the systems it
changes. Nothing but the database is contacted. Importing this module does not import DBOS;
entering a durable agent does.
"""

from glassagent._durable.agent import DurableAgent, DurableRun, DurableRunStatus
from glassagent._durable.handle import DurableAgentRun
from glassagent._public import publish

__all__ = ["DurableAgent", "DurableAgentRun", "DurableRun", "DurableRunStatus"]

publish(__name__, globals(), __all__)
