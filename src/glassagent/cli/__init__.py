"""The coding agent's command line: ``glassagent chat``, ``run "PROMPT"`` and ``serve``.

A thin layer over the public API: an `Agent` with a `glassagent.workspace.Workspace`'s tools,
a client from `glassagent.llm.create_llm_client` (or the embedded local model of
`glassagent.local`), and a `glassagent.history.History` for the conversation. Each event of
a run is shown as it happens, or printed as one JSON line with ``--json``. ``serve`` puts
the same model (and, with ``--workspace``, the same tools) behind the invoke API of
`glassagent.server` (``glassagent[server]``). Needs nothing beyond glassagent itself; the
``cli`` extra (``pip install "glassagent[cli]"``) adds colour on terminals (rich) and
reading keys from a ``.env`` file (python-dotenv).

See the docs' page *The coding agent* for the options and exit codes.
"""

from glassagent.cli._main import main

__all__ = ["main"]
