"""``python -m pruner.cli``: the ``pruner`` command."""

from pruner.cli import command

if __name__ == "__main__":
    command()
