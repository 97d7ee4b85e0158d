"""What the ``navi`` subcommands share: a session named by a prefix of its id, and a
count with its noun."""

from __future__ import annotations

import pytest

from navi.cli.common import CliError, pick_session, plural

IDS = ["01aa-1", "01aa-2", "01bb-1", "01bb"]


def test_a_session_is_its_id_or_a_prefix_only_it_has() -> None:
    assert pick_session("01aa-1", IDS) == "01aa-1"
    assert pick_session("01aa-2", IDS) == "01aa-2"
    assert pick_session("01bb", IDS) == "01bb"  # a whole id, though another starts with it
    assert pick_session("01bb-", IDS) == "01bb-1"


def test_an_ambiguous_prefix_lists_the_sessions_that_have_it() -> None:
    with pytest.raises(CliError) as caught:
        pick_session("01a", IDS)
    assert str(caught.value) == "'01a' is ambiguous: 2 sessions start with it: 01aa-1, 01aa-2"
    many = [f"01cc-{i}" for i in range(7)]
    with pytest.raises(CliError) as caught:
        pick_session("01cc", many)
    assert str(caught.value).endswith(
        "7 sessions start with it: 01cc-0, 01cc-1, 01cc-2, 01cc-3, 01cc-4, …"
    )


def test_an_unknown_session_says_where_to_look() -> None:
    with pytest.raises(CliError) as caught:
        pick_session("zz", IDS)
    assert str(caught.value) == "no session starts with 'zz' (see `navi sessions`)"


def test_plurals() -> None:
    assert [plural(n, "session") for n in (0, 1, 2)] == ["0 sessions", "1 session", "2 sessions"]
    assert plural(1, "failed call") == "1 failed call"
    assert plural(3, "match", "matches") == "3 matches"
