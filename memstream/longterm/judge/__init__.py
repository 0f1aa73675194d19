"""The judge stage: which information of a session is worth remembering long-term, asked of
an OpenAI-compatible model, with the rule-based judge when there is none or it fails.
Why it works this way: docs/design/judge.md."""

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
