"""The judge stage: which information of a session is worth remembering long-term.

``Judge.judge`` (``orchestrator``) asks an OpenAI-compatible model (``LLMClient``) with the
prompt of ``prompt`` and parses its JSON with ``parse.parse_judge_output``, which repairs what
it can (code fences, a bare list, missing or unknown fields, out-of-range importance, unknown
event ids). When there is no model, or it fails (error, timeout, empty or malformed reply),
``rules.rule_based_judge`` proposes the memories instead: regular expressions over the new
user messages, in English (``rules.en``) and Chinese (``rules.zh``), that rewrite first-person
statements ("I live in Paris", "我住在上海") into third-person memories ("The user lives in
Paris.", "用户住在上海。"). The judge never raises.

Only messages flagged ``new`` are judged; the earlier ones are context for the model.
"""

from memstream.longterm.judge.candidates import cut_content
from memstream.longterm.judge.orchestrator import Judge, JudgeResult
from memstream.longterm.judge.parse import parse_judge_output
from memstream.longterm.judge.prompt import NEW_MARK, build_prompt
from memstream.longterm.judge.rules import rule_based_judge, split_sentences

__all__ = [
    "NEW_MARK",
    "Judge",
    "JudgeResult",
    "build_prompt",
    "cut_content",
    "parse_judge_output",
    "rule_based_judge",
    "split_sentences",
]
