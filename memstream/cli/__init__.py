"""The ``memstream`` command line: one module per command that needs more than a few lines."""
