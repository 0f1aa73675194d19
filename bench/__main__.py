"""Run every benchmark: ``python -m bench [name ...]``."""

from __future__ import annotations

import asyncio
import sys

from bench import clientimport, coldsearch, ingest, loadpath, locomo, longterm, regex
from bench.loadpath import platform

BENCHMARKS = {
    "clientimport": clientimport.main,
    "coldsearch": coldsearch.main,
    "ingest": ingest.main,
    "loadpath": loadpath.main,
    "locomo": locomo.main,
    "longterm": longterm.main,
    "longterm-locomo": longterm.locomo_only,
    "platform": platform.main,
    "regex": regex.main,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    for name in names:
        asyncio.run(BENCHMARKS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
