"""Every public topic name and public record is the contract's: no module of the server or of
the client outside ``memstream_client.contract`` spells a public topic's name."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from memstream import topology
from memstream_client.contract import topics

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "clients" / "python" / "memstream_client" / "contract"
CODE = [ROOT / "memstream", ROOT / "agents", ROOT / "streams", ROOT / "tables"]
CODE.append(ROOT / "clients" / "python" / "memstream_client")


def test_the_topology_takes_the_public_topics_from_the_contract() -> None:
    assert topology.PUBLIC_TOPICS == topics.PUBLIC_TOPICS
    assert topology.OUTPUT_TOPICS == topics.OUTPUT_TOPICS
    assert set(topics.PUBLIC_TOPICS) == {
        "message-written", "session-ended", "dead-letter", "memory-changed",
    }  # fmt: skip


def test_no_module_outside_the_contract_spells_a_public_topic() -> None:
    names = set(topics.PUBLIC_TOPICS)
    spelled = []
    for folder in CODE:
        for path in folder.rglob("*.py"):
            if CONTRACT in path.parents:
                continue
            # Tokens, not ast.parse: on Python 3.11 parsing while another thread does (one a
            # test left running) fails with "AST constructor recursion depth mismatch".
            source = io.StringIO(path.read_text(encoding="utf-8"))
            for token in tokenize.generate_tokens(source.readline):
                if token.type == tokenize.STRING and token.string.strip("\"'") in names:
                    spelled.append(f"{path.relative_to(ROOT)}:{token.start[0]} {token.string}")
    assert spelled == []
