"""The JSON Schemas of the public events (``schemas/*.json``, the source of truth) and validators.

The repository's top-level ``schemas/`` folder is copied into a wheel as
``memstream_client/schemas`` (``clients/python/setup.py``); a checkout, or an editable install
of it, reads that folder itself. jsonschema is imported on the first validator, not with this
module: the client's import stays light.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import TypeChecker
    from jsonschema.protocols import Validator

_PACKAGE = Path(__file__).resolve().parent.parent
# In a checkout (clients/python beside its pyproject.toml, no copy): the repository's folder.
_CHECKOUT = (_PACKAGE.parent / "pyproject.toml").is_file() and not (_PACKAGE / "schemas").is_dir()
SCHEMAS_DIR = _PACKAGE.parents[2] / "schemas" if _CHECKOUT else _PACKAGE / "schemas"


def _is_integer(checker: TypeChecker, instance: Any) -> bool:
    # JSON Schema counts 1.0 as an integer, but orjson decodes it to a float and the event
    # models refuse floats as ids: a validator that agreed with JSON Schema here would pass
    # records that then go to the dead-letter topic.
    return isinstance(instance, int) and not isinstance(instance, bool)


def schema_names() -> list[str]:
    """Names of the stored schemas, e.g. ``message-written.v1``."""
    return sorted(path.name.removesuffix(".json") for path in _schemas_dir().glob("*.json"))


def schema_path(name: str) -> Path:
    """The file of schema ``name`` (``message-written.v1``, with or without ``.json``)."""
    file_name = name if name.endswith(".json") else f"{name}.json"
    if Path(file_name).name != file_name or file_name.startswith("."):
        raise ValueError(f"{name!r} is not a schema name")
    path = _schemas_dir() / file_name
    if not path.is_file():
        known = ", ".join(schema_names())
        raise FileNotFoundError(f"no schema {name!r} in {SCHEMAS_DIR} (known: {known})")
    return path


def load_schema(name: str) -> dict[str, Any]:
    """A fresh copy of schema ``name`` as a dict."""
    schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
    if not isinstance(schema, dict):
        raise ValueError(f"schema {name!r} is not a JSON object")
    return schema


@cache
def validator(name: str) -> Validator:
    """A cached draft 2020-12 validator of schema ``name`` that checks ``format`` too.

    Integers are strict: ``1.0`` is refused where the schema says ``integer`` (see
    ``_is_integer``). ``date-time`` is checked through the ``rfc3339-validator`` package.
    """
    from jsonschema import Draft202012Validator

    strict = _strict_draft()
    schema = load_schema(name)
    strict.check_schema(schema)
    return strict(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@cache
def _strict_draft() -> type[Validator]:
    """Draft 2020-12 with :func:`_is_integer` for ``integer``."""
    from jsonschema import Draft202012Validator, validators

    # The stubs leave ``extend`` untyped; it returns a validator class.
    strict: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    return strict


def _schemas_dir() -> Path:
    if not SCHEMAS_DIR.is_dir():
        raise FileNotFoundError(
            f"the schemas folder {SCHEMAS_DIR} is missing: this memstream-client installation is "
            "incomplete; reinstall it from a wheel or a checkout"
        )
    return SCHEMAS_DIR
