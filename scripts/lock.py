"""``make lock``: compile requirements.in into requirements.lock, pinned and hashed, without
the entries of this checkout's own distributions (``-e file:...``): pip cannot hash a folder,
and the image installs them from the source after the lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
COMPILE = [
    "pip-compile", "--quiet", "--generate-hashes", "--strip-extras", "--allow-unsafe",
    "--no-emit-index-url", "--no-emit-find-links", "--output-file", "requirements.lock",
    "requirements.in",
]  # fmt: skip


def without_local(text: str) -> str:
    """The lock without its ``-e`` entries, their ``# via`` lines and pip-compile's warning
    that they carry no hash."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith(("# WARNING: pip install will require", "# Consider using a hashable")):
            continue
        if line.startswith("-e "):
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        kept.append(line)
    return "".join(kept)


def main() -> int:
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / COMPILE[0]), *COMPILE[1:]], cwd=ROOT, check=True)
    LOCK.write_text(without_local(LOCK.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
