"""What a model's answer may get wrong, counted by stage and reason, and JSON read leniently.

Small local models are what many users run, and their answers are often not what was asked:
cut off at ``max_tokens`` in the middle of an object, wrapped in prose or a code fence, with
fields nobody asked for, wrong types, importance out of its range, ids that were never shown.
The stages repair what they can (``loads``: the JSON object a truncated answer begins with)
and fall back to their rules when nothing usable is left; either way each flaw of an answer is
counted once in ``memstream_llm_malformed_total{stage,reason}``, and each answer's outcome in
``memstream_llm_answers_total{stage,outcome}``: ``clean``, ``repaired`` (used despite flaws) or
``rejected`` (the stage's rules or extract took over).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client import Counter

Stage = Literal["judge", "conflict", "summary"]
Reason = Literal[
    "unparseable",  # no JSON in the answer at all
    "truncated",  # cut off (finish_reason "length", or JSON left open)
    "wrong_shape",  # JSON, but not the object asked for
    "invented_field",  # fields the prompt did not ask for
    "wrong_type",  # a field of the wrong type, or an item that is not an object
    "bad_value",  # a category, scope, type or action that is not one of the allowed
    "out_of_range",  # importance outside 1-10
    "unknown_id",  # an event or memory id that was not shown to the model
    "empty",  # nothing but whitespace
]
Outcome = Literal["clean", "repaired", "rejected"]

LLM_MALFORMED = Counter(
    "memstream_llm_malformed_total",
    "Flaws found in model answers (each counted once per answer), by stage and reason.",
    ["stage", "reason"],
)
LLM_ANSWERS = Counter(
    "memstream_llm_answers_total",
    "Model answers read, by stage and outcome: clean, repaired (used despite flaws) or "
    "rejected (the rules or the extract took over).",
    ["stage", "outcome"],
)

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
MAX_CUTS = 200
"""Cut points tried when repairing a truncated answer, the latest first: bounds the work on a
long answer that is JSON nowhere."""


class Unparseable(ValueError):
    """The answer holds no JSON value, whole or begun."""


@dataclass
class Flaws:
    """The flaws found in one answer."""

    found: set[Reason] = field(default_factory=set)

    def add(self, reason: Reason) -> None:
        self.found.add(reason)

    def __bool__(self) -> bool:
        return bool(self.found)

    def count(self, stage: Stage, outcome: Literal["used", "rejected"]) -> Outcome:
        """Count the flaws and the answer's outcome; answers that outcome."""
        for reason in sorted(self.found):
            LLM_MALFORMED.labels(stage, reason).inc()
        final: Outcome = "rejected" if outcome == "rejected" else "repaired" if self else "clean"
        LLM_ANSWERS.labels(stage, final).inc()
        return final


def unfenced(text: str) -> str:
    """``text`` without the BOM, surrounding space and a Markdown code fence around it."""
    stripped = text.strip().lstrip("\ufeff")
    fenced = _FENCE.search(stripped)
    if fenced:
        return fenced.group(1).strip()
    if stripped.startswith("```"):
        # An unterminated fence: a truncated answer.
        return stripped.split("\n", 1)[1] if "\n" in stripped else ""
    return stripped


def loads(text: str, flaws: Flaws) -> Any:
    """The JSON value of a model's answer: whole, inside prose or a fence, or, when the answer
    was cut off, the value it begins with closed after its last complete value (flagged
    ``truncated``). Raises ``Unparseable`` when there is none."""
    stripped = unfenced(text)
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if not starts:
        raise Unparseable("no JSON in the answer")
    start = min(starts)
    body = stripped[start:]
    decoder = json.JSONDecoder()
    try:
        # Prose after a whole value (or a second value) is only noise around it.
        value, _ = decoder.raw_decode(body)
    except ValueError:
        pass
    else:
        return value
    repaired = closed_prefix(body)
    if repaired is None:
        raise Unparseable("the answer's JSON is broken before anything in it is complete")
    flaws.add("truncated")
    return repaired


def closed_prefix(body: str) -> Any:
    """The value that ``body`` (a JSON text cut off somewhere) begins with, closed after its
    last complete value (an item, or a field of the object being written); None when no cut
    gives valid JSON."""
    cuts: list[tuple[int, str]] = []  # (end, closers) after a complete value or an opened list
    stack: list[str] = []
    in_string = escaped = False
    for i, char in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
            if char == "[":
                cuts.append((i + 1, "".join(reversed(stack))))
        elif char == "," and stack:
            # Whatever came before a comma is complete, a string or a number too.
            cuts.append((i, "".join(reversed(stack))))
        elif char in "}]":
            if not stack or stack[-1] != char:
                break  # not JSON from here on
            stack.pop()
            if not stack:
                # The whole value ended; ``loads`` would have read it unless it is broken.
                cuts.append((i + 1, ""))
                break
            cuts.append((i + 1, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-MAX_CUTS:]):
        try:
            return json.loads(body[:end] + closers)
        except ValueError:
            continue
    return None


def unknown_fields(item: dict[str, Any], known: frozenset[str]) -> bool:
    """Whether ``item`` has fields outside ``known``."""
    return any(key not in known for key in item)
