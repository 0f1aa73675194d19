"""A bulk loader of the platform benchmark's long-term memories: many users x 200 memories each,
with their lexical postings, into a database of the benchmark's own.

The rows are what ``BuiltinProvider.add`` writes (the store's own code), written with ``LOAD
DATA LOCAL INFILE`` a few hundred users per transaction, in key order so every index is
appended to, with the binary log left alone (the benchmark's database is not replicated).
Millions of memories load in minutes. A dataset already loaded is reused: only the users
missing are added, so a run can grow it."""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
from sqlalchemy.engine import make_url

from bench.loadpath.data import AGENTS, memories
from memstream.memory import NewMemory
from memstream.retrieval import document_terms
from memstream.store import memory_rows, postings
from memstream.store.database import ensure_database, migrate

PER_USER = 200  # memories per user: 120 in the profile, 20 in each of 4 agents' cubes
PROFILE_SHARE = 0.6
USERS_PER_CHUNK = 250  # users per transaction (50,000 memories, about 0.9 M postings)
DATABASE = os.environ.get("BENCH_PLATFORM_DATABASE", "memstream_platform")

MEMORY_COLUMNS = (
    "id",
    "tenant_id",
    "user_id",
    "agent_id",
    "cube_id",
    "memory_type",
    "content",
    "importance",
    "source_event_ids",
    "content_hash",
    "created_at",
    "deleted_at",
    "kind",
    "occurred_at",
    "term_count",
)
TERM_COLUMNS = ("tenant_id", "user_id", "term", "field", "memory_id", "tf", "cube_id", "impact")


def user_id(u: int) -> str:
    """Zero-padded: the users sort (and load) in the order they are numbered."""
    return f"u{u:07d}"


def bench_url(primary_url: str) -> str:
    """The benchmark's own database on the primary's server."""
    return make_url(primary_url).set(database=DATABASE).render_as_string(hide_password=False)


def user_memories(tenant: str, u: int) -> list[NewMemory]:
    """``PER_USER`` distinct memories of user ``u``, the same on every run."""
    per_agent = round(PER_USER * (1 - PROFILE_SHARE) / AGENTS)
    return memories(tenant, user_id(u), random.Random(u), PER_USER, PER_USER - AGENTS * per_agent)


def _field(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, list):
        return "[" + ",".join(f'"{v}"' for v in value) + "]"
    text = str(value)
    # The generated texts hold no tab, newline or backslash; a loader that met one would
    # write a row the file format cannot carry.
    if any(c in text for c in "\t\n\\"):
        raise ValueError(f"unloadable value {text!r}")
    return text


def chunk_rows(tenant: str, first: int, last: int, start: datetime) -> Iterator[tuple[str, str]]:
    """(memory line, postings lines) of users ``first``..``last - 1``, as the store writes them."""
    for u in range(first, last):
        for n, memory in enumerate(user_memories(tenant, u)):
            row = memory_rows.new_row(memory, start + timedelta(seconds=u, microseconds=n))
            row["id"] = f"{u:010x}{n:022x}"  # grows with the load: appended, never split
            terms = document_terms(memory.content)
            row["term_count"] = terms.length
            line = "\t".join(_field(row[c]) for c in MEMORY_COLUMNS)
            posted = postings.rows_of(
                tenant, row["user_id"], row["id"], terms, cube_id=row["cube_id"]
            )
            posted.sort(key=lambda p: (p["term"], p["field"]))
            # The postings' values are the tokenizer's terms and the ids above: checked as one
            # string, written without the per-value formatting.
            prefix, suffix = f"{tenant}\t{row['user_id']}\t", f"\t{row['id']}\t"
            cube = row["cube_id"]
            text = "".join(
                f"{prefix}{p['term']}\t{p['field']}{suffix}{p['tf']}\t{cube}\t{p['impact']!r}\n"
                for p in posted
            )
            if "\\" in text or text.count("\t") != 7 * len(posted):
                raise ValueError(f"unloadable postings of {row['id']}")
            yield line, text


@dataclass
class Loaded:
    users: int  # in the dataset now
    added: int  # by this call
    memories_added: int
    postings_added: int
    seconds: float  # this call's load time (generation included)


def _connect(url: str) -> pymysql.connections.Connection[Any]:
    u = make_url(url)
    return pymysql.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 3306,
        user=u.username or "root",
        password=u.password or "",
        database=u.database,
        local_infile=True,
        autocommit=False,
        charset="utf8mb4",
    )


def loaded_users(conn: pymysql.connections.Connection[Any], tenant: str) -> int:
    """How many users (0..n-1) the dataset holds: the highest loaded id, from the index."""
    with conn.cursor() as cur:
        cur.execute("SELECT MAX(user_id) FROM long_term_memory WHERE tenant_id = %s", (tenant,))
        (top,) = cur.fetchone() or (None,)
    return 0 if top is None else int(str(top)[1:]) + 1


async def prepare(url: str) -> None:
    await ensure_database(url)
    await migrate(url)


def write_chunk(tenant: str, first: int, last: int, folder: str) -> tuple[str, str, int, int]:
    """Users ``first``..``last - 1`` into two load files (in a child process: generating the
    rows costs as much as loading them, so the two overlap)."""
    memories_file = Path(folder) / f"memories-{first}.tsv"
    terms_file = Path(folder) / f"terms-{first}.tsv"
    n_mem = n_post = 0
    with memories_file.open("w") as mf, terms_file.open("w") as tf:
        for line, posted in chunk_rows(tenant, first, last, datetime(2026, 1, 1)):
            mf.write(line + "\n")
            tf.write(posted)
            n_mem += 1
            n_post += posted.count("\n")
    return str(memories_file), str(terms_file), n_mem, n_post


def load(url: str, tenant: str, users: int, *, progress: bool = True) -> Loaded:
    """Users 0..``users - 1`` into ``url``'s database, adding only those it lacks."""
    conn = _connect(url)
    started = time.perf_counter()
    memories_added = postings_added = 0
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("SET SESSION unique_checks = 0")
        have = loaded_users(conn, tenant)
        firsts = list(range(have, users, USERS_PER_CHUNK))
        with (
            tempfile.TemporaryDirectory(prefix="bench-bulk-") as tmp,
            ProcessPoolExecutor(max_workers=1) as pool,
        ):

            def submit(i: int) -> Future[tuple[str, str, int, int]] | None:
                if i >= len(firsts):
                    return None
                first = firsts[i]
                return pool.submit(
                    write_chunk, tenant, first, min(users, first + USERS_PER_CHUNK), tmp
                )

            pending = submit(0)
            for i in range(len(firsts)):
                assert pending is not None
                memories_file, terms_file, n_mem, n_post = pending.result()
                pending = submit(i + 1)  # the next chunk is generated while this one loads
                with conn.cursor() as cur:
                    for path, table, columns in (
                        (memories_file, "long_term_memory", MEMORY_COLUMNS),
                        (terms_file, "memory_term", TERM_COLUMNS),
                    ):
                        cur.execute(
                            f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table}"
                            f" CHARACTER SET utf8mb4 ({', '.join(columns)})"
                        )
                conn.commit()
                os.unlink(memories_file)
                os.unlink(terms_file)
                memories_added += n_mem
                postings_added += n_post
                if progress:
                    took = time.perf_counter() - started
                    last = min(users, firsts[i] + USERS_PER_CHUNK)
                    print(
                        f"    users {last:>7,}: {memories_added:>10,} memories,"
                        f" {postings_added:>11,} postings added in {took:7.1f} s",
                        flush=True,
                    )
    finally:
        conn.close()
    return Loaded(
        users=max(have, users),
        added=max(0, users - have),
        memories_added=memories_added,
        postings_added=postings_added,
        seconds=time.perf_counter() - started,
    )


@dataclass
class TableSize:
    table: str
    rows: int
    data_bytes: int
    index_bytes: int


def sizes(url: str) -> list[TableSize]:
    """Rows (exact) and InnoDB's data and index bytes of the store's tables."""
    conn = _connect(url)
    out = []
    try:
        with conn.cursor() as cur:
            for table in ("long_term_memory", "memory_term", "memory_embedding"):
                cur.execute(f"ANALYZE TABLE {table}")
                cur.fetchall()
                cur.execute(
                    "SELECT data_length, index_length FROM information_schema.tables"
                    " WHERE table_schema = DATABASE() AND table_name = %s",
                    (table,),
                )
                data, index = cur.fetchone() or (0, 0)
                cur.execute(f"SELECT COUNT(*) FROM {table}")
                (rows,) = cur.fetchone() or (0,)
                out.append(TableSize(table, int(rows), int(data), int(index)))
    finally:
        conn.close()
    return out
