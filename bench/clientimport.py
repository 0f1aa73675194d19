"""What importing the client costs a platform service, and what its first real use costs.

``import memstream_client`` in a fresh venv holding only the client distribution, against the
client at ``PREVIOUS_COMMIT`` and against ``import memstream.client`` before the client was a
distribution of its own; then two first uses, import included (a publisher checking one event,
an API client building one call and reading its answer), and ``pydantic`` with one model as
the floor. Each figure is the median of ``RUNS`` fresh interpreters taking turns: wall time,
CPU time and modules loaded, then ``-X importtime`` by package. The venv is kept under
``var/bench/client-venv``."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from io import BytesIO
from pathlib import Path
from typing import NamedTuple

from tests.support import REPO
from tests.support.distribution import CLIENT, empty_venv, outside_env, tracked_copy

RUNS = 11
VENV = REPO / "var" / "bench" / "client-venv"
# main just before the client moved to clients/python: the old ``memstream.client``.
BASELINE_COMMIT = "6d55aafecdb6d1d1da86abcf70d2290a850f560f"
BASELINE_PATHS = ("memstream", "agents", "streams", "tables", "schemas")
# main just before the client's models built on first use and asyncio loaded on use.
PREVIOUS_COMMIT = "474f366d52309c2de43c45aaa53d1da813262d31"
PREVIOUS_PATHS = (str(CLIENT), "schemas")

IMPORT, OLD = "import memstream_client", "import memstream.client"
PUBLISH = """\
from memstream_client import Publisher, checked
publisher = Publisher("127.0.0.1:9092")
fields = {"tenant_id": "acme", "user_id": "u1", "agent_id": "travel", "conversation_id": "c1",
          "role": "user", "content": "I am vegetarian."}
checked("message-written", fields, publisher.max_content_chars)
"""
ANSWER = (
    b'{"conversation_id": "c1", "messages": [{"role": "user", "content": "Book the hotel.", '
    b'"tokens": 4, "summary": false}], "long_term": {"provider": "MYSQL", "user_profile": '
    b'"[2026-03-01] The user is vegetarian.", "agent_memory": "", "items": [{"id": "m1", '
    b'"cube_id": "user_profile", "memory_type": "pref_mem", "content": "The user is '
    b'vegetarian.", "score": 0.82}]}, "tokens": {"messages": 4, "user_profile": 8, '
    b'"agent_memory": 0}, "degraded": []}'
)
CALL = f"""\
import httpx
from memstream_client import Client
from memstream_client.api import context_call
api = Client("http://127.0.0.1:8080")
call = context_call(tenant_id="acme", user_id="u1", agent_id="travel", conversation_id="c1",
                    query="Where should I eat tonight?")
assert call.body is not None
call.body.model_dump_json(exclude_unset=True)
call.read(httpx.Response(200, content={ANSWER!r}))
"""
PYDANTIC = """\
from pydantic import BaseModel, ConfigDict
class M(BaseModel):
    model_config = ConfigDict(defer_build=True)
    x: int = 0
"""
# Packages whose import time is pydantic's (pydantic's own dependencies).
PYDANTIC_PACKAGES = {
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
}


class Row(NamedTuple):
    """A statement, the interpreter that runs it and what is put before its own packages."""

    name: str
    python: Path
    statement: str
    pythonpath: str | None = None


class Run(NamedTuple):
    wall: float
    cpu: float
    modules: int


def run_once(row: Row) -> Run:
    """One fresh interpreter's wall and CPU seconds of ``row``'s statement, and the module
    count after it."""
    env = outside_env()
    if row.pythonpath is not None:
        env["PYTHONPATH"] = row.pythonpath
    script = (
        "import sys, time\nstarted, cpu = time.perf_counter(), time.process_time()\n"
        f"{row.statement}\n"
        "print(time.perf_counter() - started, time.process_time() - cpu, len(sys.modules))"
    )
    done = subprocess.run(
        [str(row.python), "-c", script],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu, modules = done.stdout.split()
    return Run(float(wall), float(cpu), int(modules))


def own_time(python: Path, pythonpath: str | None) -> dict[str, float]:
    """Seconds of one fresh ``import memstream_client`` spent in each group of modules (their
    own ``-X importtime`` time, without what they import)."""
    env = outside_env()
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [str(python), "-X", "importtime", "-c", IMPORT],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [
        line.removeprefix("import time:").split("|")
        for line in done.stderr.splitlines()
        if line.count("|") == 2 and "self [us]" not in line
    ]
    # What finished up to ``site`` is the interpreter's own start, before the statement.
    start = next(i for i, row in enumerate(rows) if row[2].rstrip() == " site") + 1
    groups: dict[str, float] = defaultdict(float)
    for own, _, name in rows[start:]:
        top = name.strip().split(".")[0]
        if top == "memstream_client":
            group = "memstream_client"
        elif top in PYDANTIC_PACKAGES:
            group = "pydantic and its dependencies"
        elif top in sys.stdlib_module_names or top.startswith("_") or top == "org":
            # ("org": ``copy`` tries Jython's module first)
            group = "standard library"
        else:
            group = top
        groups[group] += int(own) / 1e6
    return groups


def client_venv() -> Path:
    """The fresh venv with this checkout's client installed (its dependencies from the index)."""
    python = VENV / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="memstream-client-") as tmp:
        source = tracked_copy(Path(tmp), str(CLIENT), "schemas", "LICENSE") / CLIENT
        if not python.exists():
            empty_venv(VENV)
            pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        else:  # only the client's own code may have changed
            pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                   "--no-deps", "--force-reinstall"]  # fmt: skip
        subprocess.run([*pip, str(source)], env=outside_env(), check=True, timeout=900)
    return python


def extracted(commit: str, paths: tuple[str, ...], dest: Path) -> Path:
    """``paths`` of this repository at ``commit``, extracted to ``dest``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *paths],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="fully_trusted")  # our own commit; keeps the links
    return dest


def measured(rows: list[Row]) -> list[list[Run]]:
    """``RUNS`` runs of every row, the rows taking turns, after one run each that is not
    counted (it writes the bytecode of a freshly extracted tree)."""
    for row in rows:
        run_once(row)
    runs: list[list[Run]] = [[] for _ in rows]
    for _ in range(RUNS):
        for row, got in zip(rows, runs, strict=True):
            got.append(run_once(row))
    return runs


def shown(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):7.1f} ms ({min(ms):5.0f}-{max(ms):5.0f})"


async def main() -> None:
    fresh, ours = client_venv(), Path(sys.executable)
    client_path = str(REPO / CLIENT)
    with tempfile.TemporaryDirectory(prefix="memstream-baseline-") as tmp:
        old_tree = str(extracted(BASELINE_COMMIT, BASELINE_PATHS, Path(tmp) / "old"))
        previous = str(extracted(PREVIOUS_COMMIT, PREVIOUS_PATHS, Path(tmp) / "previous") / CLIENT)
        server_path = f"{REPO}:{client_path}"
        rows = [
            Row("import memstream_client (fresh venv, the client only)", fresh, IMPORT),
            Row("  the client before (fresh venv)", fresh, IMPORT, previous),
            Row("import, a publisher made, one event checked (fresh venv)", fresh, PUBLISH),
            Row("  the client before", fresh, PUBLISH, previous),
            Row("import, an API client made, one answer read (fresh venv)", fresh, CALL),
            Row("  the client before", fresh, CALL, previous),
            Row("pydantic alone, one model defined (fresh venv)", fresh, PYDANTIC),
            Row("import memstream_client (memstream's venv)", ours, IMPORT, client_path),
            Row("import memstream.client before (memstream's venv)", ours, OLD, old_tree),
            Row(
                "import memstream.client now, a re-export (memstream's venv)",
                ours,
                OLD,
                server_path,
            ),
        ]
        runs = measured(rows)
        groups: dict[str, list[dict[str, float]]] = {"now": [], "before": []}
        for _ in range(RUNS):
            groups["now"].append(own_time(fresh, None))
            groups["before"].append(own_time(fresh, previous))
    width = max(len(row.name) for row in rows)
    print(f"{'':<{width}}  {'wall (range)':>24}  {'cpu (range)':>24}  modules")
    for row, got in zip(rows, runs, strict=True):
        wall, cpu = shown([r.wall for r in got]), shown([r.cpu for r in got])
        print(f"{row.name:<{width}}  {wall:>24}  {cpu:>24}  {got[0].modules:7d}")
    print(f"medians (ranges) of {RUNS} runs each, in ms")
    old_path, fresh_client = runs[8], runs[0]
    walls = [statistics.median(r.wall for r in got) for got in (old_path, fresh_client)]
    cpus = [statistics.median(r.cpu for r in got) for got in (old_path, fresh_client)]
    print(f"old path / fresh client: {walls[0] / walls[1]:.1f}x wall, {cpus[0] / cpus[1]:.1f}x cpu")
    floor = statistics.median(r.cpu for r in runs[6])
    above = [(statistics.median(r.cpu for r in runs[i]) - floor) * 1000 for i in (1, 0)]
    print(
        f"fresh import, cpu above pydantic's floor: before {above[0]:.1f} ms, now {above[1]:.1f} ms"
    )
    print("\nfresh import's own time by package (-X importtime), median ms: before -> now")
    names = sorted({name for run in groups["now"] + groups["before"] for name in run})
    for name in names:
        was, is_ = (
            statistics.median(r.get(name, 0.0) for r in groups[k]) * 1000 for k in ("before", "now")
        )
        print(f"  {name:<32} {was:7.1f} -> {is_:7.1f}")
