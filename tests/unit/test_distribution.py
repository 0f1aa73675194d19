"""What ships with memstream fits together: the license, bounded dependencies (memstream's and
its client distribution's), the lock file the image installs, and ``.env.example``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import memstream_client
from memstream.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ROOT = ROOT / "clients" / "python"


def _project(folder: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(
        (folder / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    return project


PROJECT = _project(ROOT)
CLIENT = _project(CLIENT_ROOT)
# The distributions of this checkout: installed from the source, never from the lock.
LOCAL = {canonicalize_name(PROJECT["name"]), canonicalize_name(CLIENT["name"])}
DEPENDENCIES = [Requirement(r) for r in PROJECT["dependencies"]]
RUNTIME = [
    r for r in DEPENDENCIES + [Requirement(r) for r in CLIENT["dependencies"]]
    if canonicalize_name(r.name) not in LOCAL
]  # fmt: skip
EXTRAS = [Requirement(r) for reqs in PROJECT["optional-dependencies"].values() for r in reqs]
LOCK = (ROOT / "requirements.lock").read_text(encoding="utf-8")
PINNED = {
    canonicalize_name(name): version
    for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+) \\$", LOCK, re.MULTILINE)
}


@pytest.mark.parametrize("folder", [ROOT, CLIENT_ROOT], ids=["memstream", "client"])
def test_the_license_file_is_the_license_the_metadata_names(folder: Path) -> None:
    project = _project(folder)
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (folder / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


@pytest.mark.parametrize("requirement", DEPENDENCIES + RUNTIME + EXTRAS, ids=str)
def test_every_dependency_has_an_upper_bound(requirement: Requirement) -> None:
    assert any(s.operator in {"<", "<=", "==", "~="} for s in requirement.specifier), requirement


@pytest.mark.parametrize("requirement", RUNTIME, ids=str)
def test_the_lock_pins_every_runtime_dependency_within_its_range(
    requirement: Requirement,
) -> None:
    pinned = PINNED.get(canonicalize_name(requirement.name))
    assert pinned is not None, f"{requirement.name} is not in requirements.lock: run make lock"
    assert requirement.specifier.contains(pinned, prereleases=True), (requirement, pinned)


def test_memstream_depends_on_this_checkouts_client_and_the_lock_leaves_it_out() -> None:
    wanted = [r for r in DEPENDENCIES if canonicalize_name(r.name) == "memstream-client"]
    assert [str(r.specifier) for r in wanted] == [f"=={memstream_client.__version__}"]
    assert LOCAL.isdisjoint(PINNED)
    assert not re.search(r"^-e ", LOCK, re.MULTILINE)


def test_every_pin_of_the_lock_carries_hashes() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK)[1:]  # the first is the header comment
    assert len(entries) == len(PINNED)
    for entry in entries:
        assert "--hash=sha256:" in entry, entry.splitlines()[0]
    assert "--find-links" not in LOCK and "--index-url" not in LOCK


def test_the_image_installs_the_lock_before_the_code() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    locked = next(i for i, line in enumerate(lines) if "-r requirements.lock" in line)
    assert "--require-hashes" in lines[locked]
    code = next(i for i, line in enumerate(lines) if line.startswith("COPY . ."))
    assert locked < code
    installs = [line.split() for line in lines[code:] if "pip install --no-deps" in line]
    assert any({"./clients/python", "."} <= set(words) for words in installs), installs


def _example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, line
            values[name.strip()] = value.strip()
    return values


def test_env_example_names_real_settings_at_their_defaults() -> None:
    example = _example()
    fields = Settings.model_fields
    for name, value in example.items():
        field = name.removeprefix("MEMSTREAM_").lower()
        assert name.startswith("MEMSTREAM_") and field in fields, name
        default = fields[field].default
        shown = default.get_secret_value() if hasattr(default, "get_secret_value") else default
        assert value == str(shown), (name, value, shown)
    # As a .env file, it builds the default settings.
    assert Settings(_env_file=ROOT / ".env.example") == Settings(_env_file=None)  # type: ignore[call-arg]


def test_env_example_covers_every_public_setting() -> None:
    contract = [
        "KAFKA_BOOTSTRAP_SERVERS", "APP_ID", "TOPIC_PREFIX", "DATABASE_URL", "REDIS_URL",
        "API_HOST", "API_PORT", "API_KEYS", "LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY",
        "MEMOS_URL", "MEMOS_API_KEY", "MEM0_URL", "MEM0_API_KEY", "EMBEDDING_BASE_URL",
        "EMBEDDING_MODEL", "EMBEDDING_API_KEY",
    ]  # fmt: skip
    assert sorted(set(f"MEMSTREAM_{n}" for n in contract) - set(_example())) == []
