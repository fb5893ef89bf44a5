"""Model calls through a durable queue on PostgreSQL: two workers share the cap on calls.

The same scenario as on SQLite (`tests.support.durable_queue.two_workers_share_the_cap`), on
a database of the session's throwaway cluster: there DBOS keeps the cap by itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.durable_queue import two_workers_share_the_cap

pytest.importorskip("dbos")

pytestmark = pytest.mark.postgres


def test_two_workers_share_the_cap_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    url = postgres_url.replace("postgresql+asyncpg://", "postgresql://")  # DBOS: psycopg
    two_workers_share_the_cap(tmp_path, database_url=url)
