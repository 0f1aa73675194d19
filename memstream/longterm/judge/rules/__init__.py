"""The rule-based judge: candidates from the new user messages by regular expressions, the
fallback when there is no LLM or it fails; from the assistant's, its recommendations and
promises, attributed (``en.assistant``). Each sentence goes to the Chinese grammar (``zh``)
when it holds a Chinese character, to the English one (``en``) otherwise."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memstream.longterm.judge.candidates import default_memory_type, default_scope
from memstream.longterm.judge.rules.common import Hit, finish
from memstream.longterm.judge.rules.en import judge_en
from memstream.longterm.judge.rules.en.assistant import judge_assistant_en
from memstream.longterm.judge.rules.zh import judge_zh
from memstream.longterm.models import Candidate, SessionMessage
from memstream.text.scripts import has_han

# The rules look at this much of one message (regular expressions on bounded input).
MAX_RULE_CHARS = 8000

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "＇": "'", "`": "'"})
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.S)
_ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "e.g", "i.e", "etc", "vs")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;!?])|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: after . ! ? (then a space) and 。！？; and newlines. Common
    abbreviations ("Dr.", "e.g.") do not end a sentence."""
    pieces = [p for p in _SENTENCE_END.split(text) if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        if out:
            last_word = out[-1].rsplit(None, 1)[-1].lower().rstrip(".")
            if out[-1].endswith(".") and last_word in _ABBREVIATIONS:
                out[-1] = f"{out[-1]} {piece}"
                continue
        out.append(piece)
    return out


def _hits_of(text: str, role: str = "user") -> list[Hit]:
    text = _CODE_BLOCK.sub("\n", text.translate(_APOSTROPHES))[:MAX_RULE_CHARS]
    hits: list[Hit] = []
    for sentence in split_sentences(text):
        sentence = re.sub(r"^[\s>*#\-•·]+", "", sentence)  # quote marks and bullets
        if not sentence:
            continue
        if role == "assistant":
            if not has_han(sentence):
                hits += judge_assistant_en(sentence.replace("**", ""))
        elif has_han(sentence):
            hits += judge_zh(sentence)
        else:
            hits += judge_en(sentence)
    return hits


def rule_based_judge(messages: Sequence[SessionMessage]) -> list[Candidate]:
    """Candidates from the new user messages by regular expressions (English and Chinese),
    and the recommendations and promises of the new assistant messages (English); the
    fallback when there is no LLM or it fails."""
    out: list[Candidate] = []
    index: dict[str, int] = {}
    for message in messages:
        if not message.new or message.role not in ("user", "assistant"):
            continue
        for hit in _hits_of(message.content, message.role):
            content = finish(hit)
            key = content.casefold()
            if key in index:
                # The same memory from another message: one candidate, both sources.
                i = index[key]
                old = out[i]
                if message.event_id not in old.source_event_ids:
                    out[i] = Candidate(
                        old.content,
                        old.memory_type,
                        old.scope,
                        max(old.importance, hit.importance),
                        old.category,
                        (*old.source_event_ids, message.event_id),
                    )
                continue
            index[key] = len(out)
            out.append(
                Candidate(
                    content,
                    default_memory_type(hit.category),
                    default_scope(hit.category),
                    hit.importance,
                    hit.category,
                    (message.event_id,),
                )
            )
    return out
