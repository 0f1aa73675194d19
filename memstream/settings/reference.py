"""docs/settings.md, rendered from the sections' declarations: ``make docs`` writes it and a test
keeps it current (``python -m memstream.settings.reference PATH``)."""

from __future__ import annotations

import sys
import typing
from pathlib import Path

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from memstream.settings import Section, Settings

PREFIX = "MEMSTREAM_"

HEADER = """\
# Settings

<!-- Rendered from memstream/settings/sections.py by `make docs`: edit the declarations there. -->

All settings are environment variables, prefixed `MEMSTREAM_`, read once into one frozen
settings object (`Settings` in `memstream/settings/`, made of the sections below, one a part
of memstream); nothing else in memstream reads the environment. An optional `.env` file in the
directory memstream runs in is read too (variables already in the environment win), and
`docker compose` reads the same file for the `${MEMSTREAM_*}` values of `docker-compose.yml`;
`.env.example` lists the settings a deployment sets, at their defaults except where a line says
otherwise. Variables memstream does not know are ignored. Every command also takes
`-b/--bootstrap-servers`, which overrides `MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS`.

A value outside the "allowed" column stops the command at start-up with the setting's name
(`memstream: invalid settings: MEMSTREAM_API_PORT: Input should be greater than or equal to 1`).
The keys and passwords (`*_API_KEY`, `*_PASSWORD`, `MEMSTREAM_API_KEYS`,
`MEMSTREAM_API_ADMIN_KEYS`) are kept as secrets, and passwords in URLs are masked: neither is
shown when the settings are printed or logged.
"""

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_DAY = 24 * 3600


def render() -> str:
    """The whole page."""
    parts = [HEADER]
    for section in Settings.sections():
        parts.append(_table(section))
    return "\n".join(parts)


def _table(section: type[Section]) -> str:
    lines = [f"## {section.title}", ""]
    if section.intro:
        lines += [section.intro, ""]
    lines += ["| variable | default | allowed | what it does |", "|---|---|---|---|"]
    for name, info in section.model_fields.items():
        variable = f"`{PREFIX}{name.upper()}`"
        lines.append(f"| {variable} | {_default(name, info)} | {_allowed(info)} | {_doc(info)} |")
    return "\n".join(lines) + "\n"


def _doc(info: FieldInfo) -> str:
    doc = info.description or ""
    if not doc or "|" in doc:
        raise ValueError(f"a setting's doc must be set and hold no '|': {doc!r}")
    return doc


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _default(name: str, info: FieldInfo) -> str:
    value = info.default
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return "empty"
    if isinstance(value, int | float):
        return f"`{_number(value)}`{_magnitude(name, value)}"
    return f"`{value}`"


def _magnitude(name: str, value: float) -> str:
    """A size in bytes or a span of days, spelled out beside the number."""
    if name.endswith("_bytes") or "_bytes_" in name:
        for unit, size in _UNITS:
            if value >= size and value % size == 0:
                return f" ({_number(value / size)} {unit})"
    if name.endswith("_seconds") and value >= _DAY and value % _DAY == 0:
        days = int(value // _DAY)
        return f" ({days} day{'s' if days > 1 else ''})"
    return ""


def _allowed(info: FieldInfo) -> str:
    extra = info.json_schema_extra
    if isinstance(extra, dict) and "allowed" in extra:
        return str(extra["allowed"])
    if info.annotation is bool:
        return "`true`, `false`"
    if typing.get_origin(info.annotation) is typing.Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(info.annotation))
    bounds = {type(m): m for m in info.metadata}
    low = bounds.get(annotated_types.Ge)
    high = bounds.get(annotated_types.Le)
    above = bounds.get(annotated_types.Gt)
    if low is not None and high is not None:
        return f"{_number(low.ge)}–{_number(high.le)}"
    if low is not None:
        return f"≥ {_number(low.ge)}"
    if above is not None:
        return f"> {_number(above.gt)}"
    return ""


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m memstream.settings.reference PATH", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
