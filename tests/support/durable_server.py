"""A durable invoke server in its own process: ``python -m tests.support.durable_server``.

Reads its settings from ``DURABLE_SERVER`` (JSON: ``database``, ``base_url``, ``folder``,
``label``, ``worker_id``, ``takeover_after``): the durable tests' agent (the scripted model
at ``base_url``, and the tools ``first``, ``second``, ``third``; ``second`` kills its process
with SIGKILL the first time, see `tests.support.durable.make_agent`), served by `create_app`
with ``durable=database`` on 127.0.0.1 and a free port. The address goes to
``folder/<label>.address`` once it listens; it serves until terminated.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from glassagent.server import aserve, create_app
from tests.support.durable import make_agent


def main() -> None:
    settings = json.loads(os.environ["DURABLE_SERVER"])
    folder = Path(settings["folder"])
    agent = make_agent(settings["base_url"], folder / "effects.jsonl", folder / "killed")
    app = create_app(
        model=agent.client,
        tools=agent.tools,
        store=folder / "chats",
        durable=settings["database"],
        worker_id=settings["worker_id"],
        takeover_after=settings["takeover_after"],
    )
    address = folder / f"{settings['label']}.address"

    def started(url: str) -> None:
        address.with_suffix(".tmp").write_text(url, encoding="utf-8")
        address.with_suffix(".tmp").replace(address)

    asyncio.run(aserve(app, host="127.0.0.1", port=0, log_level="warning", on_started=started))


if __name__ == "__main__":
    main()
