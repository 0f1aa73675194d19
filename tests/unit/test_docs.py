"""The documentation stays true to the code: the settings page rendered from the declarations,
every route, every package and top-level module in the code map, every link and anchor, a
README under 20 kB."""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

from memstream.settings import reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLIENT = ROOT / "clients" / "python"
PAGES = [ROOT / "README.md", CLIENT / "README.md", *sorted(DOCS.rglob("*.md"))]
# The import packages of the repository: the server's and the client distribution's.
PACKAGES = (ROOT / "memstream", CLIENT / "memstream_client")
# The top-level folders installed inside memstream (memstream.agents is agents/).
MAPPED: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "tool"
]["setuptools"]["package-dir"]
_CODE = re.compile(r"`([^`\n]+)`")


def _rows(page: Path) -> list[list[str]]:
    """The cells of every table row of a page, header and divider rows left out."""
    rows = []
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-| :]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_settings_page_is_rendered_from_the_declarations() -> None:
    assert (DOCS / "settings.md").read_text(encoding="utf-8") == reference.render(), (
        "docs/settings.md is out of date: run `make docs`"
    )


def _routes() -> list[str]:
    import memstream.api.routes as package

    paths = []
    for module in pkgutil.iter_modules(package.__path__):
        router = importlib.import_module(f"{package.__name__}.{module.name}").router
        paths += [route.path for route in router.routes]
    return paths


def _without_parameter_names(text: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", text)


def test_every_route_is_in_the_api_reference() -> None:
    routes = _routes()
    assert len(routes) > 10, "the routes were not found where this test looks"
    reference = _without_parameter_names((DOCS / "api.md").read_text(encoding="utf-8"))
    missing = [
        p
        for p in routes
        if not re.search(re.escape(_without_parameter_names(p)) + r"(?![\w/{-])", reference)
    ]
    assert not missing, f"add to docs/api.md: {missing}"


def _library() -> list[str]:
    """Every package and top-level module of memstream and of the client, as the code map names
    them: the folders installed inside memstream by their place in the repository (``agents/``)."""
    named = []
    mapped = [
        ROOT / folder for folder in MAPPED.values() if (ROOT / folder / "__init__.py").exists()
    ]
    for path in sorted([*(p for package in PACKAGES for p in package.iterdir()), *mapped]):
        if path.name.startswith(("_", ".")) and path.name != "__main__.py":
            continue
        where = path.relative_to(ROOT)
        if path.is_dir() and (path / "__init__.py").exists():
            named.append(f"{where}/")
            named += [
                f"{sub.parent.relative_to(ROOT)}/"
                for sub in sorted(path.rglob("*/__init__.py"))
                if "__pycache__" not in sub.parts
            ]
        elif path.suffix == ".py":
            named.append(str(where))
    return named


def _code_map() -> list[tuple[str, list[str]]]:
    """Each row of the code map: the paths of its first column and those its second names."""
    return [
        (where, _CODE.findall(row[1]))
        for row in _rows(DOCS / "codemap.md")
        for where in _CODE.findall(row[0])
        if len(row) == 2 and (where.endswith(("/", ".py")) or (ROOT / where).exists())
    ]


def test_the_code_map_names_every_package_and_top_level_module() -> None:
    named = {where for where, _ in _code_map()}
    missing = [path for path in _library() if path not in named]
    assert not missing, f"add a row to docs/codemap.md for: {missing}"


def test_each_package_row_names_every_module_of_its_package() -> None:
    rows = dict(_code_map())
    unnamed = [
        f"{package}{module.name}"
        for package in _library()
        if package.endswith("/")
        for module in sorted((ROOT / package).glob("*.py"))
        if module.name != "__init__.py" and module.name not in rows.get(package, [])
    ]
    assert not unnamed, f"name these in their package's row of docs/codemap.md: {unnamed}"


def test_every_file_a_code_map_row_names_exists() -> None:
    absent = []
    for where, mentioned in _code_map():
        folder = ROOT / where if where.endswith("/") else (ROOT / where).parent
        absent += [
            f"{where} {name}"
            for name in mentioned
            if name.endswith((".py", "/"))
            and not name.startswith(_TOP)
            and not (folder / name).exists()
        ]
    assert not absent, f"docs/codemap.md names files that do not exist: {absent}"


_TOP = (
    "memstream/", "agents/", "streams/", "tables/", "schemas/", "tests/", "bench/", "docs/",
    "clients/",
)  # fmt: skip


def _module_exists(dotted: str) -> bool:
    top = CLIENT if dotted.split(".")[0] == "memstream_client" else ROOT
    parts = dotted.split(".")
    if ".".join(parts[:2]) in MAPPED:  # memstream.agents: the top-level agents/
        parts = [MAPPED[".".join(parts[:2])], *parts[2:]]
    path = top.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_and_module_the_docs_name_exists(page: Path) -> None:
    absent = []
    for name in _CODE.findall(page.read_text(encoding="utf-8")):
        if name.startswith(_TOP) and re.fullmatch(r"[\w./-]+", name):
            if not (ROOT / name).exists():
                absent.append(name)
        elif re.fullmatch(r"memstream(_client)?(\.\w+)+", name) and not _module_exists(name):
            absent.append(name)
    assert not absent, f"{page.relative_to(ROOT)} names what is not in the repository: {absent}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_reach_their_page_and_heading(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_every_design_note_is_linked_from_the_design_page() -> None:
    design = (DOCS / "design.md").read_text(encoding="utf-8")
    notes = sorted((DOCS / "design").glob("*.md")) if (DOCS / "design").is_dir() else []
    unlinked = [n.name for n in notes if f"(design/{n.name}" not in design]
    assert not unlinked, f"link these from docs/design.md: {unlinked}"


def test_the_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 20_000, f"README.md is {size} bytes; move reference text to docs/"
