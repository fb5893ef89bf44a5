"""glassagent's provider contract suite, loaded by path as the module ``contract_suite``.

The suite is one self-contained file of glassagent's own tests,
``tests/providers/contract_suite.py``; this example sits in glassagent's repository, so it
loads that file where it is. A plugin kept in a repository of its own copies the file next
to its tests instead.
"""

import importlib.util
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[3] / "tests" / "providers" / "contract_suite.py"

if "contract_suite" not in sys.modules:
    spec = importlib.util.spec_from_file_location("contract_suite", SUITE)
    assert spec is not None, f"no contract suite at {SUITE}"
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["contract_suite"] = module
    spec.loader.exec_module(module)
