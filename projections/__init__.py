"""Pure folds over the event log: what the UI shows, what the LLM sees, the session list.

- ``fold``: the ``Projection`` type, ``fold``, ``fold_until`` (as of a seq) and
  ``fold_until_position`` (as of a global position).
- ``messages`` (display history), ``context`` (LLM context; ``compression``
  beside it), ``sessions`` (the list), ``tool_state`` (todo, scratchpad, active
  profile).
- ``runner``: catches up from a store and follows it live (the only impure module).
- ``types``: ``Message``, the shape clients get; ``vec``: the append-only sequence
  that keeps states immutable yet cheap to extend.

See docs/events.md.
"""
