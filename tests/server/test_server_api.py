"""The public face of glassagent.server: what it exports, and what importing it costs."""

from __future__ import annotations

import inspect
import subprocess
import sys

import glassagent.server as server


def test_all_is_sorted_and_every_name_is_at_home_in_glassagent_server() -> None:
    assert server.__all__ == sorted(server.__all__)
    for name in server.__all__:
        obj = getattr(server, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__module__ == "glassagent.server", name


def test_importing_glassagent_or_its_server_module_imports_no_web_framework() -> None:
    code = (
        "import sys, glassagent, glassagent.server\n"
        "print([m for m in ('starlette', 'uvicorn', 'httpx') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
