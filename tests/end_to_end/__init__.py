"""pruner as a user meets it: the command, the golden examples, the packaged wheel, the
differential harness across engines, and hostile input."""
