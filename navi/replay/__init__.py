"""Replay and debugging over the event log (issue 10, the log-level half).

Pure library functions over an ``EventStore``; the REST server and the ``navi`` CLI wire
them in. See docs/replay.md.

- ``history``: helpers for reading a session's stream (its history) by page.
- ``fork``: a new session whose history is another's up to a seq.
- ``projection_set`` / ``snapshot_codec`` / ``snapshots``: the projections that are
  snapshotted every N events, how their states are stored, and folding from the
  latest snapshot (``load_messages``, ``states_at``).
- ``inspect``: time travel (``state_at``, ``llm_request``).
- ``events_query``: the raw log, filtered, as JSON lines or text.
- ``export`` / ``import_``: the JSONL export format, written and validated.
- ``verify``: fold from scratch and compare with the stored snapshots.
"""
