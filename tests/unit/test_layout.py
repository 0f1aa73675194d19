"""One import path per module and no link in the tree: the top-level folders are installed
inside ``memstream`` (pyproject.toml's package-dir), and the client's copies of what lives
outside its folder (the schemas, the license) are the repository's files."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

from memstream_client.contract import schemas

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
_spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typecheck)


def _package_dir() -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        mapped: dict[str, str] = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    return mapped


def test_no_tracked_file_is_a_symbolic_link() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert [line for line in listed.splitlines() if line.startswith("120000")] == []


def test_each_top_level_folder_is_one_package_of_memstream(tmp_path: Path) -> None:
    mapped = _package_dir()
    assert mapped == {
        f"memstream.{name}": name for name in ("agents", "streams", "tables", "schemas")
    }
    # As the installation resolves them, without the checkout on the path (as pytest puts it).
    check = (
        "import importlib.util, json\n"
        f"mapped = {mapped!r}\n"
        "print(json.dumps({folder: [\n"
        "    importlib.util.find_spec(package).origin, importlib.util.find_spec(folder)\n"
        "] for package, folder in mapped.items() if folder != 'schemas'}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    found = subprocess.run(
        [sys.executable, "-P", "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == {
        folder: [str(ROOT / folder / "__init__.py"), None]  # no second, top-level name
        for folder in ("agents", "streams", "tables")
    }


def test_the_type_check_names_the_mapped_modules_as_installed() -> None:
    assert typecheck.mapped_folders() == {folder: pkg for pkg, folder in _package_dir().items()}
    with (ROOT / "pyproject.toml").open("rb") as file:
        checked = tomllib.load(file)["tool"]["mypy"]["files"]
    assert {"agents", "streams", "tables"} <= set(checked)


def test_a_checkout_reads_the_repository_schemas() -> None:
    # A wheel carries a build-time copy (tests/integration/test_packaging.py compares it).
    assert schemas.SCHEMAS_DIR == ROOT / "schemas"
    assert schemas.schema_names() == sorted(p.stem for p in (ROOT / "schemas").glob("*.json"))
    assert not (CLIENT / "memstream_client" / "schemas").exists()


def test_the_client_license_is_the_repository_license() -> None:
    assert (CLIENT / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()


def _tokens(path: Path) -> list[tokenize.TokenInfo]:
    # Tokens, not ast.parse: on Python 3.11 parsing while another thread does (one a test left
    # running) fails with "AST constructor recursion depth mismatch".
    source = io.StringIO(path.read_text(encoding="utf-8"))
    return list(tokenize.generate_tokens(source.readline))


def _imported(path: Path) -> list[str]:
    """The modules ``path`` imports by absolute name (``from x import`` and ``import x``)."""
    code = (tokenize.NAME, tokenize.OP)
    ends = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    words = [t.string if t.type in code else ";" for t in _tokens(path) if t.type in code + ends]
    names = []
    for at, word in enumerate(words[:-1]):
        starts = at == 0 or words[at - 1] == ";"
        if starts and word in ("from", "import") and words[at + 1] != ".":
            dotted, at = [words[at + 1]], at + 1
            while at + 2 < len(words) and words[at + 1] == ".":
                dotted.append(words[at + 2])
                at += 2
            names.append(".".join(dotted))
    return names


def test_no_test_or_bench_module_imports_a_test_module() -> None:
    # What tests share lives in tests/support (and tests/fakes), never in a test module.
    importing = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in (ROOT / "tests", ROOT / "bench", CLIENT / "tests")
        for path in folder.rglob("*.py")
        for name in _imported(path)
        if name.split(".")[-1].startswith(("test_", "conftest"))
        or name.startswith(("tests.unit", "tests.integration"))
    ]
    assert importing == []


def test_the_unit_tests_load_none_of_the_server_stack_they_do_not_test() -> None:
    # The root conftest is imported for every unit run; the integration fixtures are not.
    heavy = ("sqlalchemy", "fastapi", "aiokafka", "redis", "faust", "uvicorn", "memstream.store")
    check = f"import sys, tests.conftest\nprint([m for m in {heavy!r} if m in sys.modules])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    found = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"
