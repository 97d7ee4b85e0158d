"""OpenAI conversations as Navi sessions: a request's earlier messages become a new
session's history, and a request that extends a session the caller already has
continues it.

A conversation is a list of turns (wire.Turn): the system prompt, user messages
and answers. A session's log says the same thing:

- a system prompt is ``context.injected(kind="client_system", role="system")`` inside a
  run of its own at the start of the session (``run.started`` → ``context.injected`` →
  ``run.completed`` with no answer): the LLM sees it as a system message after the
  profile's own prompt, and the web client does not show it (it shows no system
  message). A system message later in a conversation goes into the next user message
  (wire.SYSTEM_NOTE): a run cannot start without one after the first;
- a user message is ``user.message``;
- an answer of the history is a run with ``backend="client"`` (nothing was asked of an
  LLM: the client says the assistant answered this): ``run.started`` → ``llm.completed``
  → ``run.completed``. A live run's answer is its ``run.completed``; a client may send
  back either that or everything that streamed (events.py), and both are
  recognised.

The history is written as the new session's first events in one append (as a fork
is, navi/replay/fork.py), checked against the run state machine first; the live user
message then goes through the session actor like any other.

Which session a request continues is recomputed from the caller's own sessions
(``SessionsView.listing``): one whose turns are exactly the request's turns but the
last. The session list's ``preview`` (the end of the last answer) rules out nearly
every session without reading its log; the turns of those that remain are cached by
the summary's ``last_active`` and ``message_count``, so a restart or a session
continued in the web client is seen correctly.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from events.envelope import NewEvent, Recorded
from events.store import EventStore
from events.types import (
    ContextInjected,
    ImageRef,
    LLMCompleted,
    RunCompleted,
    RunStarted,
    SessionCreated,
    UserMessage,
)
from navi.blobs import BlobStore
from navi.ids import new_id
from navi.run.state import INITIAL, transition
from navi.server.auth import User
from navi.server.openai.events import RunReader
from navi.server.openai.wire import Turn
from navi.server.views import SessionsView, load_log
from navi.session.errors import SessionError
from navi.session.input import store_images
from profiles import Profile, profile_hash
from projections.sessions import SessionSummary, preview_of

CLIENT_SYSTEM = "client_system"
CLIENT_BACKEND = "client"
CACHE_SESSIONS = 1024

# A turn as the index compares it: role, text (stripped), image hashes.
TurnKey = tuple[str, str, tuple[str, ...]]


def turn_key(turn: Turn) -> TurnKey:
    return (turn.role, turn.text.strip(), turn.image_hashes)


# ---------------------------------------------------------------- a new session


async def seed_session(
    store: EventStore,
    *,
    profile: Profile,
    user_id: str,
    history: list[Turn],
    blobs: BlobStore | None,
) -> str:
    """Create a session whose history is ``history`` (every turn but the one to answer);
    returns its id."""
    session_id = new_id()
    created = SessionCreated(profile_id=profile.id, user_id=user_id, origin="api")
    staged = [NewEvent(event=created)]
    open_run: str | None = None  # the seeded run in progress
    next_run: str | None = None  # the run a recorded user message starts

    def run() -> str:
        nonlocal next_run
        run_id = next_run or new_id()
        next_run = None
        started = RunStarted(
            profile_id=profile.id,
            profile_hash=profile_hash(profile),
            mode="run",
            backend=CLIENT_BACKEND,
            max_iterations=profile.max_iterations,
        )
        staged.append(NewEvent(event=started, run_id=run_id))
        return run_id

    def end(run_id: str, answer: str) -> None:
        staged.append(NewEvent(event=RunCompleted(content=answer), run_id=run_id))

    for turn in history:
        if turn.role == "system":
            open_run = open_run or run()
            injected = ContextInjected(kind=CLIENT_SYSTEM, role="system", content=turn.text)
            staged.append(NewEvent(event=injected, run_id=open_run))
        elif turn.role == "user":
            if open_run is not None:
                end(open_run, "")
                open_run = None
            images = await store_images(
                blobs, list(turn.images), user_id=user_id, session_id=session_id
            )
            next_run = new_id()
            staged.append(
                NewEvent(event=UserMessage(text=turn.text, images=images), run_id=next_run)
            )
        else:
            run_id = open_run or run()
            staged.append(NewEvent(event=LLMCompleted(content=turn.text), run_id=run_id))
            end(run_id, turn.text)
            open_run = None
    if open_run is not None:
        end(open_run, "")
    state = INITIAL
    for new in staged:  # what we write must be legal: check it before writing
        state = transition(state, new.event)
    await store.append(session_id, staged, expected_seq=0)
    return session_id


# ---------------------------------------------------------------- a session's turns


def _image_hash(image: str | ImageRef) -> str:
    if isinstance(image, ImageRef):
        if image.data:  # recorded inline before the blob store
            return _inline_hash(image.data)
        return image.sha256
    return _inline_hash(image)


def _inline_hash(data: str) -> str:
    try:
        raw = base64.b64decode(data.split(",", 1)[-1], validate=False)
    except (binascii.Error, ValueError):
        raw = data.encode()
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class SessionTurns:
    """A session's conversation as the index compares it: for each turn the keys it
    matches (an answer: its final text, or everything that streamed)."""

    turns: tuple[frozenset[TurnKey], ...]
    run_active: bool

    def matches(self, turns: list[TurnKey]) -> bool:
        return len(turns) == len(self.turns) and all(
            key in keys for key, keys in zip(turns, self.turns, strict=True)
        )


def session_turns(records: list[Recorded], run_active: bool) -> SessionTurns:
    out: list[set[TurnKey]] = []

    def add(role: str, texts: set[str], images: tuple[str, ...] = ()) -> None:
        texts = {t.strip() for t in texts if t.strip()}
        if not texts and not images:
            return
        if out and next(iter(out[-1]))[0] == role:  # consecutive turns of one role merge
            merged = set()
            for old_role, old_text, old_images in out[-1]:
                for text in texts or {""}:
                    joined = "\n\n".join(t for t in (old_text, text) if t)
                    merged.add((old_role, joined, old_images + images))
            out[-1] = merged
            return
        out.append({(role, text, images) for text in texts or {""}})

    reader: RunReader | None = None
    for record in records:
        event = record.event
        if isinstance(event, UserMessage):
            add("user", {event.text}, tuple(_image_hash(i) for i in event.images))
        elif isinstance(event, ContextInjected) and event.kind == CLIENT_SYSTEM:
            add("system", {event.content})
        elif isinstance(event, RunStarted) and record.run_id is not None:
            reader = RunReader(run_id=record.run_id)
        if reader is not None:
            reader.feed(record)
            if reader.ending is not None:
                if reader.ending != "failed":
                    add("assistant", {reader.answer, reader.streamed})
                reader = None
    return SessionTurns(tuple(frozenset(keys) for keys in out), run_active)


# ---------------------------------------------------------------- the index


class ConversationIndex:
    """Finds the caller's session that a request continues (see the module doc)."""

    def __init__(self, sessions: SessionsView) -> None:
        self.sessions = sessions
        self._cache: OrderedDict[str, tuple[tuple[str, int], SessionTurns]] = OrderedDict()

    async def find(self, user: User, turns: list[Turn]) -> SessionSummary | None:
        """The session (the caller's, at rest) whose conversation is ``turns`` but the
        last, which must follow an answer; None when there is none."""
        if len(turns) < 2 or turns[-2].role != "assistant":
            return None
        wanted = [turn_key(turn) for turn in turns[:-1]]
        end = preview_of(turns[-2].text)
        for summary in await self.sessions.listing(user):
            if not summary.preview or not end.endswith(summary.preview):
                continue
            known = await self._turns(summary)
            if known is not None and not known.run_active and known.matches(wanted):
                return summary
        return None

    async def _turns(self, summary: SessionSummary) -> SessionTurns | None:
        stamp = (summary.last_active, summary.message_count)
        cached = self._cache.get(summary.session_id)
        if cached is not None and cached[0] == stamp:
            self._cache.move_to_end(summary.session_id)
            return cached[1]
        try:
            log = await load_log(self.sessions.store, summary.session_id)
            found = session_turns(log.records, log.run_active())
        except SessionError:
            return None  # a damaged session is continued by nobody
        self._cache[summary.session_id] = (stamp, found)
        while len(self._cache) > CACHE_SESSIONS:
            self._cache.popitem(last=False)
        return found
