"""Execute examples/notebook.ipynb in a fresh kernel; fail on any error or a missing timeline."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"


def main() -> int:
    """Run the notebook; 0 when every cell ran and the timelines were shown."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    html = [
        output["data"]["text/html"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if "text/html" in output.get("data", {})
    ]
    timelines = [page for page in html if 'class="ga-run"' in page]
    if len(timelines) < 3:
        print(f"expected the notebook to show 3 timelines, it showed {len(timelines)}")
        return 1
    print(f"{NOTEBOOK.name}: {len(notebook.cells)} cells ran, {len(timelines)} timelines shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
