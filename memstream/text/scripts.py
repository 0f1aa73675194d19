"""Unicode blocks of the scripts written without spaces between words, named once.
Why it works this way: docs/design/scripts.md."""

from __future__ import annotations

import re

HANGUL_JAMO = "\u1100-\u11ff"
CJK_SYMBOLS = "\u3000-\u303f"  # CJK symbols and punctuation: 、。「」 and the ideographic space
KANA = "\u3040-\u30ff"  # Hiragana, Katakana
HANGUL_COMPATIBILITY_JAMO = "\u3130-\u318f"
KATAKANA_EXTENSION = "\u31f0-\u31ff"
HAN_EXTENSION_A = "\u3400-\u4dbf"
HAN_UNIFIED = "\u4e00-\u9fff"
HANGUL_SYLLABLES = "\uac00-\ud7af"
HAN_COMPATIBILITY = "\uf900-\ufaff"
FULL_WIDTH = "\uff00-\uffef"  # half-width and full-width forms: ，！？ＡＢＣ１２３

HAN = HAN_EXTENSION_A + HAN_UNIFIED + HAN_COMPATIBILITY
CJK = KANA + HAN + HANGUL_SYLLABLES
CJK_EXTENDED = HANGUL_JAMO + HANGUL_COMPATIBILITY_JAMO + KATAKANA_EXTENSION + CJK
WIDE = CJK_SYMBOLS + CJK + FULL_WIDTH

CJK_EXTENDED_START = "\u1100"
"""No character of ``CJK_EXTENDED`` sorts below this (one comparison rules most text out)."""

_HAN_CHAR = re.compile(f"[{HAN}]")
_CJK_CHAR = re.compile(f"[{CJK}]")
_WORD = re.compile(rf"[^\W_{CJK}]+")


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Chinese character."""
    return _HAN_CHAR.search(text) is not None


def is_mostly_cjk(text: str) -> bool:
    """Whether ``text`` has more CJK characters than words in other scripts (a CJK character
    carries about as much as a word: "我住在Berlin" is mostly CJK, "I love 北京" is not)."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk > 0 and cjk > len(_WORD.findall(text))
