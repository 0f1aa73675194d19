"""The JSON Schemas of the public events (``schemas/*.json``, the source of truth) and validators.

The repository's top-level ``schemas/`` folder is installed as ``memstream/schemas`` (package
data), so a checkout, an editable install and a wheel all find it in the same place.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, TypeChecker, validators
from jsonschema.protocols import Validator

SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"  # memstream/schemas


def _is_integer(checker: TypeChecker, instance: Any) -> bool:
    # JSON Schema counts 1.0 as an integer, but orjson decodes it to a float and the event
    # models refuse floats as ids: a validator that agreed with JSON Schema here would pass
    # records that then go to the dead-letter topic.
    return isinstance(instance, int) and not isinstance(instance, bool)


# The stubs leave ``extend`` untyped; it returns a validator class.
_Draft202012Strict: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


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
    schema = load_schema(name)
    _Draft202012Strict.check_schema(schema)
    return _Draft202012Strict(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _schemas_dir() -> Path:
    if not SCHEMAS_DIR.is_dir():
        raise FileNotFoundError(
            f"the schemas folder {SCHEMAS_DIR} is missing: this memstream installation is "
            "incomplete; reinstall it from a wheel or a checkout"
        )
    return SCHEMAS_DIR
