"""The JSON Schemas go into the distribution at build time: the repository's top-level
``schemas/`` folder (the source of truth, outside this distribution's folder) is copied into
``memstream_client/schemas`` of the wheel and of the sdist, which a wheel is then built from.
An editable install reads the repository's folder itself (``contract/schemas.py``)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PACKAGED = Path("memstream_client", "schemas")
SOURCE = HERE.parent.parent / "schemas"


def copy_schemas(into: Path) -> None:
    """The schemas into ``into``, from the checkout, unless they came with an sdist."""
    if (HERE / PACKAGED).is_dir():
        return  # built from an sdist: package data already
    if not SOURCE.is_dir():
        raise FileNotFoundError(
            f"{SOURCE} is missing: memstream-client is built from the memstream repository "
            "(its schemas/ folder) or from an sdist of it"
        )
    (into / PACKAGED).mkdir(parents=True, exist_ok=True)
    for schema in sorted(SOURCE.glob("*.json")):
        shutil.copyfile(schema, into / PACKAGED / schema.name)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            copy_schemas(Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        copy_schemas(Path(base_dir))


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
