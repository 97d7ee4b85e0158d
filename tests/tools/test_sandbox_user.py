"""Who sandboxed code runs as when Navi runs as root (tools/sandbox_user.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid

import pytest

from tools.sandbox_user import (
    PrivilegeDrop,
    SandboxUser,
    SandboxUserError,
    create_system_user,
    resolve_sandbox_user,
)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root switches users")


@as_root
def test_a_uid_a_uid_gid_or_a_name_names_the_user() -> None:
    assert resolve_sandbox_user({"NAVI_SANDBOX_USER": "64123:64124"}) == SandboxUser(
        uid=64123, gid=64124
    )
    nobody = pwd.getpwnam("nobody")
    by_name = resolve_sandbox_user({"NAVI_SANDBOX_USER": "nobody"})
    assert by_name is not None and (by_name.uid, by_name.gid) == (nobody.pw_uid, nobody.pw_gid)
    by_uid = resolve_sandbox_user({"NAVI_SANDBOX_USER": str(nobody.pw_uid)})
    assert by_uid is not None and by_uid.name == "nobody"


@as_root
@pytest.mark.parametrize("value", ["0", "root", "0:1000", "1000:0"])
def test_root_or_roots_group_is_refused(value: str) -> None:
    with pytest.raises(SandboxUserError, match="never runs as root"):
        resolve_sandbox_user({"NAVI_SANDBOX_USER": value})


@as_root
def test_a_missing_named_user_says_how_to_make_it() -> None:
    with pytest.raises(SandboxUserError, match="no such user; create it"):
        resolve_sandbox_user({"NAVI_SANDBOX_USER": f"nobody-{uuid.uuid4().hex[:8]}"})


@as_root
def test_the_system_user_is_made_once_without_home_or_shell() -> None:
    name = f"navi-t{uuid.uuid4().hex[:8]}"
    try:
        made = create_system_user(name)
        assert made.created and made.uid != 0 and made.gid != 0
        entry = pwd.getpwnam(name)
        assert entry.pw_shell.endswith(("nologin", "false"))
        assert not os.path.exists(entry.pw_dir)
        again = create_system_user(name)  # found, not made
        assert not again.created and again.uid == made.uid
    finally:  # the host as it was
        subprocess.run(["userdel", name], capture_output=True, check=False)
    with pytest.raises(KeyError):
        pwd.getpwnam(name)


def test_not_root_means_the_servers_own_user() -> None:
    if os.geteuid() == 0:
        pytest.skip("run as root: the sandbox user applies")
    assert resolve_sandbox_user({"NAVI_SANDBOX_USER": "nobody"}) is None


def test_the_drop_clears_every_capability_and_makes_a_user_namespace(tmp_path: object) -> None:
    drop = PrivilegeDrop(
        user=SandboxUser(uid=64123, gid=64124),
        setpriv="/usr/bin/setpriv",
        unshare="/usr/bin/unshare",
    )
    argv = drop.argv(tmp_path)  # type: ignore[arg-type]
    assert argv[:3] == ["/usr/bin/setpriv", "--reuid=64123", "--regid=64124"]
    assert {"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--nnp"} <= set(argv)
    assert argv[argv.index("/usr/bin/unshare") + 1 : argv.index("/usr/bin/unshare") + 3] == [
        "--user",
        "--map-current-user",
    ]
    assert argv[-1] == "--"
