"""Every public topic name and public record is the contract's: no module of the server or of
the client outside ``memstream_client.contract`` spells a public topic's name."""

from __future__ import annotations

import ast
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
    spelled = []
    for folder in CODE:
        for path in folder.rglob("*.py"):
            if CONTRACT in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in topics.PUBLIC_TOPICS:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert spelled == []
