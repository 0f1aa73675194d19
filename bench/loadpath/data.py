"""The load path benchmark's data: synthetic conversations, summaries and long-term memories,
loaded into MySQL and Redis for one isolated tenant."""

from __future__ import annotations

import asyncio
import random
import string
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from memstream.memory import USER_PROFILE, MemoryType, NewMemory, agent_cube
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.summaries import Summary, SummaryStore
from memstream.store.turns import HistoryIndex
from memstream.text.tokens import count_many, count_tokens

CONVERSATIONS = 2_000
MESSAGES = 200  # per conversation, all of them cached
USERS = 20
MEMORIES = 1_000  # per user: 600 in the user profile, 100 in each agent's cube
AGENTS = 4  # conversation i talks to agent i % AGENTS
PROFILE_MEMORIES = 600
POOL = 20_000  # distinct user and distinct assistant messages the conversations draw from
INSERT_CONVERSATIONS = 50  # conversations per insert_many (10,000 rows) and per cache warm


def _words(text: str) -> list[str]:
    return text.split()


WORDS: dict[str, list[str]] = {
    "city": _words(
        "Lisbon Berlin Kyoto Dublin Austin Oslo Porto Seville Vienna Montreal Nairobi "
        "Hanoi Lima Prague Krakow Melbourne Edinburgh Istanbul Marseille Bologna Tallinn Bergen "
        "Valencia Ghent Zurich Busan Oaxaca Tbilisi Cork Lyon"
    ),
    "food": _words(
        "vegetarian Italian Thai Japanese Mexican Lebanese Korean Ethiopian Greek Indian "
        "Vietnamese Peruvian French Georgian Turkish Spanish"
    ),
    "dish": _words(
        "ramen paella falafel dumplings tacos risotto pho sushi curry shakshuka gnocchi "
        "bibimbap ceviche moussaka"
    ),
    "activity": _words(
        "hiking cycling bouldering sailing yoga running swimming birdwatching pottery "
        "kayaking skiing tennis climbing surfing"
    ),
    "name": _words(
        "Anna Ben Chloe Diego Emma Farid Grace Hiro Ines Jonas Kemi Liam Maya Noah Olga "
        "Priya Quentin Rosa Sami Tara"
    ),
    "relation": _words(
        "sister brother mother father partner colleague manager friend cousin "
        "neighbour daughter son"
    ),
    "job": _words(
        "nurse architect teacher engineer chef pilot lawyer dentist photographer "
        "accountant journalist physiotherapist"
    ),
    "month": _words(
        "January February March April May June July August September October November December"
    ),
    "weekday": _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
    "season": _words("spring summer autumn winter"),
    "skill": _words(
        "Spanish Japanese piano guitar watercolour Python woodworking baking diving "
        "French photography"
    ),
    "thing": _words(
        "museum harbour market garden cathedral station bookshop park castle riverside gallery"
    ),
    "drink": ["espresso", "green tea", "oat latte", "mint tea", "filter coffee"],
    "n": [str(n) for n in range(2, 13)],
    "year": [str(y) for y in range(2019, 2028)],
    "day": [str(d) for d in range(1, 29)],
}

MEMORY_TEMPLATES: dict[MemoryType, list[str]] = {
    "pref_mem": [
        "Prefers {food} restaurants and often orders {dish} when eating out.",
        "Likes {activity} at weekends, usually early in the morning.",
        "Prefers window seats on flights longer than {n} hours.",
        "Avoids crowded places and prefers a quiet {thing} in {city}.",
        "Drinks {drink} in the morning and no coffee after {n} pm.",
        "Does not eat {dish} and prefers lighter {food} food.",
        "Likes to book tables for {n} people on {weekday} evenings.",
    ],
    "text_mem": [
        "Lives in {city}, a short walk from the {thing}.",
        "Works from an office in {city} {n} days a week.",
        "Visited {city} in {month} {year} and loved the {thing}.",
        "Grew up in {city} and visits family there every {month}.",
        "Is planning a trip to {city} in {month} with {name}, their {relation}.",
        "Wants to learn {skill} before the end of {year}.",
        "Plans to go {activity} near {city} next {season}.",
        "Is saving up to move to {city} in {year}.",
        "{name} is the user's {relation} and works as a {job} in {city}.",
        "The user's {relation} {name} has a birthday on {month} {day}.",
        "{name}, the user's {relation}, loves {food} food and {activity}.",
        "Meets {name} for {activity} every {weekday}.",
    ],
}

QUERY_TEMPLATES = [
    "Can you recommend a {food} restaurant in {city}?",
    "What should I pack for {activity} near {city} in {month}?",
    "Remind me what my {relation} {name} does for work.",
    "Help me plan a weekend in {city} with {name}.",
    "Any gift ideas for my {relation}'s birthday in {month}?",
    "Where could I go {activity} this {season}?",
    "Find me a quiet place to eat {dish} near the {thing}.",
    "When am I going to {city} again?",
]

USER_TEMPLATES = [
    "Can you find me a {food} restaurant in {city} for {n} people on {weekday}?",
    "I'm thinking about going {activity} near {city} in {month}. Any tips?",
    "My {relation} {name} is visiting next week, what could we do in {city}?",
    "Remind me, when is my flight to {city}?",
    "Please add {skill} lessons to my plans for {month}.",
    "What's the weather usually like in {city} in {month}?",
    "Thanks! Could you also book a table somewhere near the {thing}?",
    "I'd rather avoid {dish} this time, something lighter please.",
    "Is the {thing} in {city} open on {weekday}?",
    "Ok, and how long does it take to get there from the station?",
]

ASSISTANT_TEMPLATES = [
    "I found {n} {food} places in {city} with tables free on {weekday}.",
    "The closest one is about {n} minutes from the {thing} and is known for its {dish}.",
    "In {month}, {city} is usually mild, so a light jacket should be enough for {activity}.",
    "I noted that your {relation} {name} works as a {job}, which helps when picking a place.",
    "Would you like me to confirm the booking for {n} pm?",
    "If you prefer, I can also look for options near the {thing} or in the old town.",
    "There are beginner {skill} courses starting in {month}, most of them twice a week.",
    "Here is a short plan: morning {activity}, lunch at a {food} place, then the {thing}.",
    "Prices are moderate, around {n}0 euros per person without drinks.",
    "The {thing} is open from {n} am on {weekday}s, and it is quieter before noon.",
    "Trains to {city} leave every {n}0 minutes and take a little over {n} hours.",
    "I have added a reminder for {month} {day} so you do not miss it.",
]


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def fill(template: str, rng: random.Random) -> str:
    return template.format(**{f: rng.choice(WORDS[f]) for f in _fields(template)})


def user_text(rng: random.Random) -> str:
    parts = [fill(rng.choice(USER_TEMPLATES), rng) for _ in range(rng.choice((1, 1, 1, 2)))]
    return " ".join(parts)


def assistant_text(rng: random.Random) -> str:
    # Mostly a few sentences, sometimes a long answer (a plan, a list of options).
    count = rng.randint(8, 14) if rng.random() < 0.1 else rng.randint(1, 5)
    return " ".join(fill(rng.choice(ASSISTANT_TEMPLATES), rng) for _ in range(count))


def query_text(rng: random.Random) -> str:
    return fill(rng.choice(QUERY_TEMPLATES), rng)


def summary_text(rng: random.Random) -> str:
    """A conversation summary of a few hundred tokens, attributed as the summaries are."""
    said = [f"User: {user_text(rng)}" for _ in range(4)]
    said += [f"Assistant: {fill(rng.choice(ASSISTANT_TEMPLATES), rng)}" for _ in range(8)]
    rng.shuffle(said)
    return " ".join(said)


def user_of(conversation: int) -> str:
    return f"user-{conversation % USERS}"


def agent_of(conversation: int, *, long_term: bool) -> str:
    return f"{'lt' if long_term else 'st'}-agent-{conversation % AGENTS}"


def message_pool(rng: random.Random) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Distinct user and assistant texts with their cl100k_base token counts."""
    users = list({user_text(rng) for _ in range(POOL)})
    assistants = list({assistant_text(rng) for _ in range(POOL)})
    return (
        list(zip(users, count_many(users), strict=True)),
        list(zip(assistants, count_many(assistants), strict=True)),
    )


def conversation(
    tenant: str,
    i: int,
    pool: tuple[list[tuple[str, int]], list[tuple[str, int]]],
    rng: random.Random,
    owner: Callable[[int], str],
) -> list[StoredMessage]:
    start = datetime(2026, 3, 1) + timedelta(minutes=i)
    out = []
    for n in range(MESSAGES):
        role = "user" if n % 2 == 0 else "assistant"
        content, tokens = rng.choice(pool[n % 2])
        out.append(
            StoredMessage(
                tenant_id=tenant,
                conversation_id=f"conv-{i}",
                event_id=f"conv-{i}-{n}",
                user_id=owner(i),
                agent_id=agent_of(i, long_term=True),
                role=role,
                message_type="chat",
                content=content,
                token_count=tokens,
                created_at=start + timedelta(seconds=20 * n),
                source_conversation_id=f"conv-{i}",
            )
        )
    return out


def memories(
    tenant: str,
    user: str,
    rng: random.Random,
    total: int = MEMORIES,
    profile: int = PROFILE_MEMORIES,
) -> list[NewMemory]:
    """``total`` distinct memories of one user (1,000 unless told): ``profile`` of them in the
    profile, the rest shared evenly by each agent's cube."""
    cubes: list[tuple[str, str | None, int]] = [(USER_PROFILE, None, profile)]
    per_agent = (total - profile) // AGENTS
    cubes += [
        (agent_cube(agent_of(a, long_term=True)), agent_of(a, long_term=True), per_agent)
        for a in range(AGENTS)
    ]
    out = []
    for cube, agent, count in cubes:
        seen: set[str] = set()
        while len(seen) < count:
            memory_type: MemoryType = rng.choice(("pref_mem", "text_mem", "text_mem"))
            content = fill(rng.choice(MEMORY_TEMPLATES[memory_type]), rng)
            if content in seen:
                continue
            seen.add(content)
            out.append(
                NewMemory(
                    tenant_id=tenant,
                    user_id=user,
                    agent_id=agent,
                    cube_id=cube,
                    memory_type=memory_type,
                    content=content,
                    importance=rng.randint(3, 8),
                )
            )
    return out


async def load_conversations(
    settings: Settings,
    tenant: str,
    conversations: int,
    rng: random.Random,
    owner: Callable[[int], str] = user_of,
) -> dict[str, float]:
    """``conversations`` conversations of ``MESSAGES`` messages into MySQL (their turns
    indexed) and the same into Redis, each with its summary, conversation ``i`` the user
    ``owner(i)``'s; answers what each part took (seconds)."""
    engine = create_engine(settings.database_url, pool_size=4)
    store = MessageStore(engine)
    cache = RedisCache.from_url(
        settings.redis_url,
        timeout=30,
        prefix=settings.cache_prefix,
        max_messages=settings.cache_max_messages,
        ttl_seconds=settings.cache_ttl_seconds,
    )
    took: dict[str, float] = {}
    try:
        started = time.perf_counter()
        pool = message_pool(rng)
        took["texts and token counts"] = time.perf_counter() - started

        started = time.perf_counter()
        tokens = 0

        async def chunk(first: int) -> None:
            nonlocal tokens
            convs = {
                (tenant, f"conv-{i}"): conversation(tenant, i, pool, rng, owner)
                for i in range(first, min(first + INSERT_CONVERSATIONS, conversations))
            }
            rows = [m for ms in convs.values() for m in ms]
            tokens += sum(m.token_count for m in rows)
            await asyncio.gather(store.insert_many(rows), cache.warm(convs))

        firsts = list(range(0, conversations, INSERT_CONVERSATIONS))
        for pair in range(0, len(firsts), 2):  # two chunks in flight
            await asyncio.gather(*(chunk(f) for f in firsts[pair : pair + 2]))
        took["messages into MySQL and Redis"] = time.perf_counter() - started
        took["mean tokens per message"] = tokens / (conversations * MESSAGES)

        # As the worker's turn index does: a search also ranks the user's stored turns.
        started = time.perf_counter()
        await HistoryIndex(engine, per_tick=2000, tenant_id=tenant).run_until_done()
        took["turn index"] = time.perf_counter() - started

        started = time.perf_counter()
        summaries = SummaryStore(engine)
        for i in range(conversations):
            text = summary_text(rng)
            await summaries.save(
                tenant,
                f"conv-{i}",
                Summary(text, count_tokens(text)),
                covered=MESSAGES - 20,
                last_message_id=0,
            )
        took["conversation summaries"] = time.perf_counter() - started
    finally:
        await cache.close()
        await engine.dispose()
    return took


async def load_data(settings: Settings, tenant: str) -> dict[str, float]:
    """Messages into MySQL and the same into Redis, memories into the built-in store."""
    rng = random.Random(20260301)
    took = await load_conversations(settings, tenant, CONVERSATIONS, rng)
    engine = create_engine(settings.database_url, pool_size=4)
    provider = BuiltinProvider(engine)
    try:
        started = time.perf_counter()
        for u in range(USERS):
            await provider.add(memories(tenant, f"user-{u}", rng))
        took["memories into the built-in store"] = time.perf_counter() - started
    finally:
        await engine.dispose()
    return took
