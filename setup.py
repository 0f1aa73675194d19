"""What pyproject.toml cannot declare: the package list, memstream's own packages with the
top-level folders its ``[tool.setuptools.package-dir]`` maps into it (``agents/`` is
``memstream.agents``), so each module has one import path."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

with (Path(__file__).parent / "pyproject.toml").open("rb") as file:
    MAPPED = tomllib.load(file)["tool"]["setuptools"]["package-dir"]

setup(packages=[*find_packages(include=["memstream", "memstream.*"]), *MAPPED])
