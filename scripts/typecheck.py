"""mypy (strict, as configured in pyproject.toml) over the modules under the names they are
installed as: the top-level folders that setuptools maps into ``memstream`` are checked as
``memstream.agents``, ``memstream.streams``..., not as top-level packages. mypy has no
package-dir mapping and follows no editable install's import hook, so plain ``mypy`` would see
their imports as missing; this renames its sources, then runs mypy's build as its command does
(mypy is compiled: its functions cannot be patched).

Usage: ``python scripts/typecheck.py [mypy arguments]``.
"""

from __future__ import annotations

import sys
import time
import tomllib
from pathlib import Path

from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource
from mypy.util import FancyFormatter, count_stats

ROOT = Path(__file__).resolve().parent.parent


def mapped_folders() -> dict[str, str]:
    """Each mapped top-level folder and the package it is installed as (``agents``:
    ``memstream.agents``), from pyproject.toml, the declaration setup.py builds from."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        package_dir: dict[str, str] = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in package_dir.items()}


def installed_name(source: BuildSource, folders: dict[str, str]) -> BuildSource:
    top, dot, rest = source.module.partition(".")
    if top not in folders:
        return source
    module = folders[top] + dot + rest
    return BuildSource(source.path, module, source.text, source.base_dir, source.followed)


def main() -> int:
    fscache = FileSystemCache()
    started = time.time()
    sources, options = process_options(sys.argv[1:], fscache=fscache)
    folders = mapped_folders()
    sources = [installed_name(source, folders) for source in sources]
    _, messages, blockers = run_build(sources, options, fscache, started, sys.stdout, sys.stderr)
    errors, notes, files = count_stats(messages)
    formatter = FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if errors:
        print(formatter.format_error(errors, files, len(sources), blockers=blockers))
    else:
        print(formatter.format_success(len(sources)))
    return (2 if blockers else 1) if messages and notes < len(messages) else 0


if __name__ == "__main__":
    sys.exit(main())
