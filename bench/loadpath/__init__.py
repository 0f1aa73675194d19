"""Load path of the query API: ``POST /v1/context`` served as deployed (``run`` says how)."""

from bench.loadpath.run import main

__all__ = ["main"]
