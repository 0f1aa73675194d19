"""What importing the client costs a platform service: ``import memstream_client`` in a fresh
venv holding only the client distribution (``pip install ./clients/python``), against the old
path, ``import memstream.client`` of the last commit before the client became a distribution
of its own (it loaded SQLAlchemy and the server's modules), in memstream's own venv.

Each figure is the median of ``RUNS`` fresh interpreters: the ``-X importtime`` cumulative time
of the imported module (wall clock), the CPU time the import used (what a busy machine does
not inflate), and the number of modules it left loaded. The fresh venv is kept under
``var/bench/client-venv`` (the first run installs the client's dependencies from the package
index; later runs reinstall only the client).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from tests.support import REPO
from tests.support.distribution import CLIENT, empty_venv, outside_env, tracked_copy

RUNS = 7
VENV = REPO / "var" / "bench" / "client-venv"
# main just before the client moved to clients/python: the old ``memstream.client``.
BASELINE_COMMIT = "6d55aafecdb6d1d1da86abcf70d2290a850f560f"
BASELINE_PATHS = ("memstream", "agents", "streams", "tables", "schemas")
CLIENT_MODULE, OLD = "memstream_client", "memstream.client"


def import_seconds(python: Path, module: str, pythonpath: str | None) -> tuple[float, float, int]:
    """One fresh interpreter's cumulative import time of ``module``, the CPU seconds of that
    import and the module count after it."""
    env = outside_env()
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    script = (
        f"import sys, time\nstarted = time.process_time()\nimport {module}\n"
        "print(time.process_time() - started, len(sys.modules))"
    )
    done = subprocess.run(
        [str(python), "-X", "importtime", "-c", script],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line.split("|") for line in done.stderr.splitlines() if line.count("|") == 2]
    cumulative = next(int(row[1]) for row in rows if row[2].strip() == module)
    cpu, modules = done.stdout.split()
    return cumulative / 1e6, float(cpu), int(modules)


def measured(python: Path, module: str, pythonpath: str | None = None) -> tuple[float, float, int]:
    runs = [import_seconds(python, module, pythonpath) for _ in range(RUNS)]
    wall = statistics.median(run[0] for run in runs)
    return wall, statistics.median(run[1] for run in runs), runs[0][2]


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


def baseline_tree(dest: Path) -> Path:
    """The old server's import packages at ``BASELINE_COMMIT``, extracted to ``dest``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", BASELINE_COMMIT, *BASELINE_PATHS],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="fully_trusted")  # our own commit; keeps the links
    return dest


async def main() -> None:
    fresh = client_venv()
    ours = Path(sys.executable)
    client_path = str(REPO / CLIENT)
    rows = [
        ("import memstream_client (fresh venv, the client only)", measured(fresh, CLIENT_MODULE))
    ]
    rows.append(
        ("import memstream_client (memstream's venv)", measured(ours, CLIENT_MODULE, client_path))
    )
    with tempfile.TemporaryDirectory(prefix="memstream-baseline-") as tmp:
        old = str(baseline_tree(Path(tmp)))
        rows.append(("import memstream.client before (memstream's venv)", measured(ours, OLD, old)))
    now = f"{REPO}:{client_path}"
    rows.append(
        ("import memstream.client now, a re-export (memstream's venv)", measured(ours, OLD, now))
    )
    width = max(len(name) for name, _ in rows)
    print(f"{'':<{width}}  {'wall':>9}  {'cpu':>9}  modules")
    for name, (wall, cpu, modules) in rows:
        print(f"{name:<{width}}  {wall * 1000:6.1f} ms  {cpu * 1000:6.1f} ms  {modules:7d}")
    (old_wall, old_cpu, _), (new_wall, new_cpu, _) = rows[2][1], rows[0][1]
    print(
        f"old path / fresh client: {old_wall / new_wall:.1f}x wall, {old_cpu / new_cpu:.1f}x cpu "
        f"(medians of {RUNS} runs each)"
    )
