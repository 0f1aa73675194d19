"""Sensitive content, kept out of the long-term memory the load path hands to agents.
Why it works this way: docs/design/sensitive-content.md."""

from __future__ import annotations

import re
from collections.abc import Sequence

_PASSWORD = re.compile(
    r"\b(?:password|passwd|passcode|pwd|pin)\b\s*(?P<sep>[:=：]|is\b|was\b)\s*(?P<value>\S+)",
    re.IGNORECASE,
)
_NOT_A_VALUE = frozenset(
    ("none", "null", "empty", "unknown", "required", "reset", "changed", "hidden", "redacted")
)
# With a separator any value counts ("密码：abcd"); without one it needs a digit ("密码123456"),
# so "忘记密码 reset 了" passes.
_PASSWORD_ZH = re.compile(
    r"(?:密码|口令)\s*(?:(?:是|为|：|:|=)\s*|(?=[A-Za-z!@#$%^&*._+\-]*\d))"
    r"[A-Za-z0-9!@#$%^&*._+\-]{4,}"
)
# A keyword, a separator and a token-like value of 16+ characters holding a digit (every
# generated key does; "secret: the_family_recipe_for_bread" passes).
_SECRET_ASSIGNMENT = re.compile(
    r"(?:\b(?:api[_\- ]?key|access[_\- ]?key|secret[_\- ]?key|client[_\- ]?secret"
    r"|(?:access|auth|refresh|api)[_\- ]?token|token|secret)\b\s*(?:[:=：]|is\b)"
    r"|(?:密钥|秘钥|令牌)\s*(?:是|为|：|:|=)?)"
    r"\s*['\"]?(?=[A-Za-z_\-./+]*\d)[A-Za-z0-9_\-./+]{16,}",
    re.IGNORECASE,
)
_KEY_FORMATS = re.compile(
    "|".join(
        (
            r"\bsk-[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic and compatible API keys
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
            r"\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}",  # GitHub tokens
            r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
            r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+",  # JWTs
            r"(?i:\bbearer)\s+[A-Za-z0-9._~+/\-]{16,}=*",  # bearer tokens
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",  # PEM / OpenSSH / PGP
        )
    )
)
# Runs of digits joined by single spaces or hyphens; card numbers are looked for inside them.
_DIGIT_RUN = re.compile(r"\d+(?:[ \-]\d+)*")
_CN_RESIDENT_ID = re.compile(
    r"(?<![0-9A-Za-z])[1-8]\d{5}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
    r"\d{3}[0-9Xx](?![0-9A-Za-z])"
)
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"
_US_SSN = re.compile(r"(?<![\d\-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d\-])")
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def is_sensitive(text: str) -> bool:
    """Whether ``text`` holds a credential, a payment card, a national id number or an IBAN."""
    return (
        _has_password(text)
        or _PASSWORD_ZH.search(text) is not None
        or _SECRET_ASSIGNMENT.search(text) is not None
        or _KEY_FORMATS.search(text) is not None
        or _has_card_number(text)
        or any(_cn_id_valid(m.group()) for m in _CN_RESIDENT_ID.finditer(text))
        or _US_SSN.search(text) is not None
        or any(_iban_valid(m.group()) for m in _IBAN.finditer(text))
    )


def _has_password(text: str) -> bool:
    for match in _PASSWORD.finditer(text):
        value = match["value"].rstrip(".,;!?。，；！？")
        if len(value) < 4 or set(value) == {"*"} or value.lower() in _NOT_A_VALUE:
            continue  # too short to be one, masked, or a placeholder
        # After "is"/"was" a plain word is prose ("the password is required"); a secret has a
        # digit or a symbol. After ":" or "=" any value counts.
        if match["sep"] in ":=：" or not value.isalpha():
            return True
    return False


def _has_card_number(text: str) -> bool:
    for run in _DIGIT_RUN.finditer(text):
        groups = re.split(r"[ \-]", run.group())
        # Every contiguous span of groups is a candidate, so a card next to a date or another
        # number in the same run is still found.
        for first in range(len(groups)):
            digits = ""
            for last in range(first, len(groups)):
                digits += groups[last]
                if len(digits) > 19:
                    break
                if _card_shape(groups[first : last + 1]) and _luhn_valid(digits):
                    return True
    return False


def _card_shape(groups: Sequence[str]) -> bool:
    digits = "".join(groups)
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456":
        return False
    # Printed cards group digits by 4 (Amex 4-6-5): short groups are dates, times or codes.
    return all(4 <= len(g) <= 6 for g in groups[:-1]) and (len(groups) == 1 or len(groups[-1]) <= 6)


def _luhn_valid(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cn_id_valid(number: str) -> bool:
    weighted = sum(int(d) * w for d, w in zip(number[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[weighted % 11] == number[17].upper()


def _iban_valid(candidate: str) -> bool:
    iban = candidate.replace(" ", "")
    if not 15 <= len(iban) <= 34:
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
