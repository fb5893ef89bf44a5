"""Evaluate an agent over a dataset: scores, tool trajectories, cost and latency, a report.

A `Dataset` holds cases (`Case`: a prompt or a conversation, the expected output and/or
tool calls, tags, metadata), built in Python or read from JSON Lines, YAML or JSON.
``await evaluate(agent, dataset)`` runs each case (concurrently, repeated, each attempt
within a timeout and a budget), scores every attempt with evaluators (`Exact`,
`Contains`, `Regex`, `JsonEqual`, `JsonSchemaValid`, `Trajectory`, `Judge`, or your own
function returning a `Score`, a float or a bool), records every attempt's events, and
returns a `Report`: print it as a table, save it as JSON or as an HTML page, and
`compare` two of them. `load_bfcl` makes a dataset of the Berkeley Function Calling
Leaderboard's questions. Where pydantic-evals or inspect-ai already runs your evaluations,
`pydantic_evals_task` and `inspect_solver` make an agent their task or solver. Importing this
module imports none of rich, yaml, pydantic-evals or inspect-ai.

Example:
    ```python
    from glassagent.evals import Case, Dataset, evaluate

    dataset = Dataset("smoke", [Case("capital", "Capital of France? One word.", "Paris")])
    report = await evaluate(agent, dataset, repeat=3)
    report.print()
    report.save("eval.json")
    ```
"""

from glassagent._evals.bfcl import BFCL_CATEGORIES, bfcl_agent, load_bfcl
from glassagent._evals.compare import CaseChange, ChangeKind, Comparison, compare
from glassagent._evals.evaluators import (
    DEFAULT_RUBRIC,
    Contains,
    Exact,
    JsonEqual,
    JsonSchemaValid,
    Judge,
    Regex,
    charge,
    evaluator_named,
)
from glassagent._evals.interop import inspect_solver, pydantic_evals_task
from glassagent._evals.model import (
    BUILTIN_EVALUATORS,
    Case,
    Dataset,
    EvalContext,
    Evaluator,
    EvaluatorResult,
    ExpectedCall,
    Score,
)
from glassagent._evals.report import Attempt, CaseReport, Report, Summary
from glassagent._evals.runner import evaluate
from glassagent._evals.stats import pass_at_k
from glassagent._evals.trajectory import Trajectory
from glassagent._public import publish

__all__ = [
    "BFCL_CATEGORIES",
    "BUILTIN_EVALUATORS",
    "DEFAULT_RUBRIC",
    "Attempt",
    "Case",
    "CaseChange",
    "CaseReport",
    "ChangeKind",
    "Comparison",
    "Contains",
    "Dataset",
    "EvalContext",
    "Evaluator",
    "EvaluatorResult",
    "Exact",
    "ExpectedCall",
    "JsonEqual",
    "JsonSchemaValid",
    "Judge",
    "Regex",
    "Report",
    "Score",
    "Summary",
    "Trajectory",
    "bfcl_agent",
    "charge",
    "compare",
    "evaluate",
    "evaluator_named",
    "inspect_solver",
    "load_bfcl",
    "pass_at_k",
    "pydantic_evals_task",
]

publish(__name__, globals(), __all__)
