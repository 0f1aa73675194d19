"""Memories that share their words, as "the user ..." memories do: the built-in store's
search tests rank them."""

from __future__ import annotations

import random
from collections.abc import Sequence

from memstream.memory import USER_PROFILE, NewMemory, agent_cube

# Words of everyday "the user ..." memories: the memories and the queries share them.
WORDS = [
    "cello",
    "violin",
    "garden",
    "berlin",
    "paris",
    "coffee",
    "tea",
    "hiking",
    "running",
    "nurse",
    "doctor",
    "teacher",
    "cat",
    "dog",
    "novel",
    "poetry",
    "chess",
    "football",
    "sister",
    "brother",
    "wedding",
    "birthday",
    "vegetarian",
    "fish",
    "train",
    "flight",
    "window",
    "seat",
    "concert",
    "museum",
    "painting",
    "pottery",
    "yoga",
    "swimming",
    "marathon",
    "bakery",
    "bread",
    "cheese",
]

# Questions whose words such memories share.
QUERIES = [
    "cello concert",
    "Where does my sister live, Berlin or Paris?",
    "coffee or tea in the morning",
    "a vegetarian bakery with good bread",
    "window seat on the train",
    "marathon running and swimming",
]


def sharing_words(
    tenant: str,
    n: int,
    words: Sequence[str],
    *,
    user: str = "u1",
    seed: int = 7,
    tag: str = "",
) -> list[NewMemory]:
    """``n`` memories of 3 to 14 of ``words`` each, two in three in the user profile and the
    rest in agent ``a1``'s cube; ``tag`` tells apart the notes of two calls."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        chosen = " ".join(rng.choice(words) for _ in range(rng.randint(3, 14)))
        cube = USER_PROFILE if i % 3 else agent_cube("a1")
        out.append(
            NewMemory(
                tenant_id=tenant,
                user_id=user,
                agent_id=None if cube == USER_PROFILE else "a1",
                cube_id=cube,
                memory_type="text_mem",
                content=f"The user mentioned {chosen} (note {tag}{i}).",
                importance=5,
                source_event_ids=(f"e{tag}{i}",),
            )
        )
    return out
