"""``python -m glassagent``: the coding agent's command line (see `glassagent.cli`)."""

import sys

from glassagent.cli import main

if __name__ == "__main__":
    sys.exit(main())
