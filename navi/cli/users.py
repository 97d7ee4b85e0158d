"""``navi users add NAME``: a new user with a new token, stored as its hash.

The token is printed once, on standard output (and nowhere else); the users file
(``NAVI_USERS_FILE``, ``--file``, else ``users.json`` in the data folder) keeps only its
SHA-256. A running server reads the file again within a second of the change; one that
ran open (no users file yet) and looks for the data folder's ``users.json`` requires
tokens from then on (navi/accounts.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from navi.cli.common import fail


def add_commands(sub: Any) -> None:
    users = sub.add_parser("users", help="manage the users of the users file")
    actions = users.add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add", help="add a user with a new token (printed once, stored as its hash)"
    )
    add.add_argument("name", help="the user's id (letters, digits, '_', '.', '@', '-')")
    add.add_argument(
        "--role",
        choices=("user", "admin"),
        default="user",
        help="admin: every tool; user (default): the tools of --tools, or all but "
        "code_exec, terminal, ssh_exec, write_tool and reload_tools",
    )
    add.add_argument("--tools", help="comma-separated tools a 'user' may use (e.g. a,b)")
    add.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="GRANT",
        help="a reach a 'user' gets beyond the defaults, repeatable: lan (private/LAN "
        "addresses), tool_network (the network in the sandbox), auto_approval (profiles "
        "whose tool_policy runs tools without asking); see docs/approvals.md",
    )
    add.add_argument(
        "--file",
        help="the users file (default: NAVI_USERS_FILE, else users.json in the data folder)",
    )
    add.set_defaults(func=cmd_users_add)


def cmd_users_add(args: argparse.Namespace) -> int:
    from navi.accounts import AuthConfigError, add_user
    from navi.data_dir import USERS_FILE, data_dir
    from navi.environment import environment

    env = environment()
    # The data folder's users.json is read by a server that finds it there at start.
    where = args.file or env.get("NAVI_USERS_FILE", "").strip() or str(data_dir(env) / USERS_FILE)
    tools = None
    if args.tools is not None:
        tools = tuple(t.strip() for t in args.tools.split(",") if t.strip())
    path = Path(where)
    try:
        grants = tuple(g.strip() for arg in args.grant for g in arg.split(",") if g.strip())
        token = add_user(path, args.name, role=args.role, tools=tools, grants=grants)
    except AuthConfigError as exc:
        return fail(str(exc), 2)
    sys.stdout.write(token + "\n")
    sys.stderr.write(
        f"Added {args.role} {args.name!r} to {path}. The token above is shown only this "
        "once: the file keeps its hash. Send it as 'Authorization: Bearer <token>'.\n"
        "A server that reads this file picks the change up within a second; one that ran "
        "without a users file and looks for this one (the data folder's users.json) "
        "requires a token for every request from now on. A server told to read another "
        "file (NAVI_USERS_FILE) must be pointed at this one and restarted.\n"
    )
    return 0
