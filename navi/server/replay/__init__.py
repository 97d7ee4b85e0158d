"""Replay of a recorded session: its REST routes (state at a seq, timeline, forks,
export and import) and the replay WebSocket that plays it in the live protocol."""
