"""A workspace: tools that let the model list, read, write and edit the files of one folder.

``Workspace(root).tools`` gives an agent ``list_files``, ``read_file``, ``write_file`` and
``edit_file``, confined to `root`; ``allow_commands=True`` adds ``execute_command``, whose
output lines stream as ``tool_progress`` events and which, on Linux, runs each command in a
sandbox (`sandbox_support` tells whether this machine can make it). ``confirm`` is asked
before each change.
"""

from glassagent._public import publish
from glassagent._workspace.sandbox import SandboxMode, SandboxSupport, sandbox_support
from glassagent._workspace.workspace import Confirm, Workspace

__all__ = ["Confirm", "SandboxMode", "SandboxSupport", "Workspace", "sandbox_support"]

publish(__name__, globals(), __all__)
