"""Every number that shapes the write path, in one place, with the reason for each.

They depend on each other, so read them together before changing one. They are
budgets kept by ``bench/``, not targets to chase: a change that saves a few percent
of a benchmark but adds a mechanism is not wanted (docs/event-log.md).
"""

from __future__ import annotations

# ---------------------------------------------------------------- a session's writer

# Events one flush of a session's writer takes at most. Every chunk of a batch waits
# for the whole batch's commit before a client sees it, and SQLite commits 256 chunks
# in a millisecond or two on the event loop: small enough for the commit -> frame
# latency, large enough for a flat-out stream (bench/stream.py) to be a few hundred
# transactions a second, not tens of thousands.
WRITER_MAX_BATCH = 256
# How long a staged chunk waits for company before it is flushed: nothing a person
# can see, yet long enough for a fast stream to fill its batches.
WRITER_MAX_DELAY = 0.005
# Events staged ahead of the writer task before a stager waits (backpressure): one
# batch, so that the next one fills while the last one commits. It also bounds how far
# a stream runs ahead of what its clients have seen.
WRITER_QUEUE = WRITER_MAX_BATCH

# ---------------------------------------------------------------- the store's committer

# Appends waiting for the committer before an appender waits: one in flight per
# session writer, so this is room for that many busy sessions.
STORE_QUEUE = 1024
# Events one transaction takes at most, from however many appends: a few writers'
# full batches. It bounds how long one commit holds the event loop (SQLite commits on
# it) and so every other session's latency.
STORE_MAX_BATCH = 4 * WRITER_MAX_BATCH
# One append can be larger than that on its own (an import writes a whole session, say
# 150,000 events: seconds of work): a transaction of more events than this commits in a
# worker thread, so the loop runs on (SQLite).
STORE_INLINE_MAX_EVENTS = STORE_MAX_BATCH

# ---------------------------------------------------------------- SQLite

# Rows per INSERT statement: one statement is one call into SQLite, so per-row work
# (statement reset, parameter binding) is paid once per group (~20% cheaper than
# executemany of single rows). A full writer batch is two statements.
SQLITE_ROWS_PER_INSERT = 128
# How often a background thread copies the WAL into the database file while commits
# happen. Left to SQLite, whichever commit crosses its 1,000-page threshold does it and
# takes 35-50 ms (the p99 of bench/stream.py's latency).
SQLITE_CHECKPOINT_EVERY = 0.1
# Rows of a stream read per query, with a loop turn between pages: a page decodes in
# about 2 ms at most, so a long recovery never holds the loop for longer.
SQLITE_READ_PAGE = 500
