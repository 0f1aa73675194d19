"""Run every benchmark: ``python -m bench [name ...]``."""

from __future__ import annotations

import asyncio
import sys

from bench import (
    cacheloss,
    clientimport,
    coldsearch,
    forgets,
    ingest,
    loadpath,
    locomo,
    locomo_api,
    longmemeval,
    longterm,
    longterm_llm,
    regex,
    routecpu,
    termbackfill,
    tracing,
)
from bench.loadpath import admission, cpu, cpupair, platform

BENCHMARKS = {
    "admission": admission.main,
    "cacheloss": cacheloss.main,
    "clientimport": clientimport.main,
    "coldsearch": coldsearch.main,
    "forgets": forgets.main,
    "ingest": ingest.main,
    "loadpath": loadpath.main,
    "loadcpu": cpu.main,
    "cpupair": cpupair.main,
    "locomo": locomo.main,
    "locomo-api": locomo_api.main,
    "longmemeval": longmemeval.main,
    "longterm": longterm.main,
    "longterm-locomo": longterm.locomo_only,
    "longterm-llm": longterm_llm.main,
    "platform": platform.main,
    "regex": regex.main,
    "routecpu": routecpu.main,
    "tracing": tracing.main,
    "termbackfill": termbackfill.main,
}


# Run only when named: the model's venv (make llm-venv) and about half an hour; a baseline
# checkout to compare with.
OPT_IN = frozenset({"longterm-llm", "cpupair"})


def main(argv: list[str]) -> int:
    names = argv or [name for name in BENCHMARKS if name not in OPT_IN]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    for name in names:
        asyncio.run(BENCHMARKS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
