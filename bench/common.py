"""What every benchmark prints first: the command that ran it and the machine it ran on."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from types import ModuleType


def print_header(*libraries: ModuleType) -> None:
    """The exact command, then Python and each library's version, CPUs and architecture."""
    print("command:", shlex.join([sys.executable, *sys.argv]))
    versions = ", ".join(f"{lib.__name__} {lib.__version__}" for lib in libraries)
    print(
        f"python {platform.python_version()}, {versions}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )
