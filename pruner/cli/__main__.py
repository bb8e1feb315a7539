"""``python -m pruner.cli``: the ``pruner`` command."""

import sys

from pruner.cli import main

if __name__ == "__main__":
    sys.exit(main())
