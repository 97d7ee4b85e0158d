"""``navi chat`` without a message: a conversation at a prompt.

Enter sends; Alt+Enter (or Esc then Enter) starts a new line; ↑/↓ walk the history,
kept across sessions in a file (:func:`history_path`). Ctrl+C during an answer stops it
(recorded, as the Stop button does) and gives the prompt back; Ctrl+C on an empty
prompt, Ctrl+D or ``/exit`` leaves.
"""

from __future__ import annotations

import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console
from rich.text import Text

from navi.cli.chat_view import ChatView
from navi.cli.remote import NaviClient
from navi.cli.turn import INTERRUPTED, run_turn

EXIT_WORDS = frozenset({"/exit", "/quit"})


def history_path(data_dir: str) -> Path:
    """Where the prompt's history lives: ``chat_history`` in Navi's data folder
    (``NAVI_DATA_DIR``), else ``~/.navi_history``."""
    if data_dir:
        return Path(data_dir) / "chat_history"
    return Path(os.path.expanduser("~")) / ".navi_history"


def _key_bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    def _send(event: KeyPressEvent) -> None:
        event.current_buffer.validate_and_handle()

    @keys.add("escape", "enter")  # Alt+Enter sends Esc Enter in a terminal
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=EOFError)

    return keys


def _prompt_session(history_file: Path) -> PromptSession[str]:
    history: FileHistory | None = None
    try:
        history_file.parent.mkdir(parents=True, exist_ok=True)
        history_file.touch(exist_ok=True)  # written to after each message: must be ours
        history = FileHistory(str(history_file))
    except OSError:  # another user's data folder: a history for this session only
        history = None
    return PromptSession(
        history=history,
        multiline=True,
        key_bindings=_key_bindings(),
        prompt_continuation="… ",
    )


async def interactive_chat(
    client: NaviClient,
    session: str | None,
    profile: str | None,
    console: Console,
    history_file: Path,
) -> int:
    """Turns until the user leaves. ``session``: the one to continue, else a new one
    (of ``profile``) is made at the first message."""
    where = f"session {session}" if session else "a new session"
    model = await client.model_of(session)
    console.print(
        Text(
            f"Navi at {client.url} · {where}" + (f" · model {model}" if model else "") + "\n"
            "Enter sends · Alt+Enter new line · Ctrl+C stops an answer · Ctrl+D leaves",
            style="dim",
        )
    )
    prompt = _prompt_session(history_file)
    view = ChatView(console)
    while True:
        try:
            message = (await prompt.prompt_async("> ")).strip()
        except (EOFError, KeyboardInterrupt):
            break
        if not message:
            continue
        if message in EXIT_WORDS:
            break
        if session is None:
            session = await client.create_session(profile)
        if await run_turn(client, session, message, view) == INTERRUPTED:
            break  # a second Ctrl+C: the user wants out
    if session is not None:
        console.print(Text(f"session: {session}", style="dim"))
    return 0
