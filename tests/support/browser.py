"""A headless chromium driven by selenium, as the browser tests use it.

Debian's chromium and chromedriver; nothing is downloaded (``SE_OFFLINE``). Missing pieces
skip the test, except in CI (``CI=true``), where they fail it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest


def missing(what: str) -> NoReturn:
    """Skip the test for lack of `what`; in CI, fail it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide {what} for the browser test (see .ci/run)")
    pytest.skip(f"needs {what}")


@contextmanager
def headless_chromium(width: int = 1280, height: int = 860) -> Iterator[Any]:
    """A selenium driver of a headless chromium with a window of `width` x `height`."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        missing("chromium and chromedriver (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing('selenium (pip install -e ".[dev]")')
    offline = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # selenium-manager must not look anything up
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        if offline is None:
            del os.environ["SE_OFFLINE"]
        else:
            os.environ["SE_OFFLINE"] = offline
