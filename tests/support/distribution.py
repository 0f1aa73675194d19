"""The distributions as a platform team gets them: the tracked files of this checkout copied
outside it (links kept as links), built and installed into empty venvs there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

CLIENT = Path("clients/python")
# A child of an empty venv must not see this checkout or the settings of the test's services.
FOREIGN_ENV = ("MEMSTREAM_", "PYTHON")


def tracked_copy(dest: Path, *under: str) -> Path:
    """The tracked files (all of them, or those under the folders ``under``) as they are in the
    work tree, copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *under],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        name = raw.decode()
        source, target = REPO / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            target.write_bytes(source.read_bytes())
    return dest


def empty_venv(path: Path) -> Path:
    """A new venv at ``path`` with nothing but pip; its ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin"


def outside_env() -> dict[str, str]:
    """This process's environment without what points a child at the checkout."""
    return {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN_ENV)}
