"""A subagent's session, as its session actor sees it: a child actor of its parent's
session (``SpawnSubagent``), asked to run its task once (``StartSubtask``); after a
crash, it goes on with the run its log shows. See navi/subagents.py for the tool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import ActorRef, Supervision
from navi.session import messages as m
from navi.session.errors import SessionError

if TYPE_CHECKING:
    from navi.session.actor import SessionActor


async def spawn_subagent(parent: SessionActor, child_id: str) -> ActorRef[object]:
    """The actor of subagent stream ``child_id``, started as a child of ``parent``."""
    if parent.stop_signal.is_set():
        raise SessionError("the run is stopping: no subagent starts now")
    existing = parent.children.get(child_id)
    if existing is not None and not existing.is_stopped:
        return existing
    child = type(parent)(child_id, parent.deps, parent=parent)
    return await parent.spawn_child(child, child_id, supervision=Supervision.stop())


async def start_subtask(session: SessionActor, message: m.StartSubtask) -> m.SubtaskStarted:
    """Run the subagent's task; after a crash, go on with the run the log shows."""
    if session.parent is not None and session.parent.stop_signal.is_set():
        raise SessionError("the parent's run is stopping: the subagent does not start")
    if session.state.created is None:
        await session._create(
            m.Create(
                profile_id=message.profile_id,
                user_id=message.user_id,
                parent_stream_id=message.parent_stream_id,
                parent_call_id=message.parent_call_id,
            )
        )
    progress = session.state.progress
    if progress.run_id is None:
        reply = await session._start_run(message.task, (), (), "ephemeral")
        return m.SubtaskStarted(run_id=reply.run_id, after_seq=reply.after_seq)
    after = progress.started_seq - 1
    if not session.state.run_active:
        return m.SubtaskStarted(
            run_id=progress.run_id, after_seq=after, ended_seq=session.state.last_seq
        )
    await session._resume()
    return m.SubtaskStarted(run_id=progress.run_id, after_seq=after)
