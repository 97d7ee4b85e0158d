"""The two tiers of the suite: fast (the test process alone) and slow (anything it starts).

``make test-fast`` runs ``pytest -m "not slow"``; ``make test`` runs both. A test is
put in the slow tier, with the marker ``slow``, as it is collected, when:

- it carries the marker ``slow``, ``postgres``, ``embedded`` or ``browser``;
- it uses PostgreSQL or Chromium: the fixture ``postgres_server_url`` or ``browser``
  (directly or through another fixture; it then gets ``postgres`` / ``browser`` too);
- its module imports from the sandbox (:data:`SLOW_IMPORTS`): it is about programs run in
  bubblewrap;
- its code, the code of the fixtures it uses, or of the helpers they call (the functions
  and classes of the ``tests`` package, followed through) names something that starts a
  process or a server: the ``subprocess`` module, asyncio's subprocesses,
  ``sys.executable`` (a Python command line to run), uvicorn or Playwright
  (:data:`SLOW_MODULES`, :data:`SLOW_NAMES`).

So a new test that starts a Navi server through ``tests.support.navi_server``, a
``navi serve`` process through the security suite's fixtures or anything through
``subprocess`` lands in the slow tier without anyone writing a marker. In-process fakes
on 127.0.0.1 (the HTTP fake LLM in the test's own event loop, ``LocalHTTPServer``) stay
in the fast tier: they start in a millisecond and are what the wire tests need.

What names cannot show is a process that library code starts for the test (a sandboxed
tool, an MCP server over stdio). The check sees those: an audit hook
(:func:`sys.addaudithook`) records every process started while a fast-tier test runs
(``subprocess.Popen``, which asyncio's subprocesses use too, ``os.fork``,
``os.posix_spawn``, ``os.system``, ``os.exec*``, ``os.spawn*``), and that test then fails
at teardown, naming the command: mark it (or its module) ``slow``. The check runs in
every run, ``make test`` (CI) included, so a test in the wrong tier is found the day it
lands.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Iterator
from types import CodeType, FunctionType, ModuleType
from typing import Any

import pytest

__all__ = ["fast_test_started", "mark_slow_tests", "slow_reason", "watch_processes"]

# Objects from these modules (the module itself, or a function or class defined in it)
# start a process or a server. (PostgreSQL is told by its fixture and marker: a store
# fixture that names PostgresEventStore for one of its params is fast for the others.)
SLOW_MODULES = {
    "subprocess": "starts a process",
    "multiprocessing": "starts a process",
    "pty": "starts a process",
    "uvicorn": "serves HTTP in a thread (uvicorn)",
    "playwright": "drives Chromium",
}
# Attribute names that say the same whatever object they are read from.
SLOW_NAMES = {
    "create_subprocess_exec": "starts a process",
    "create_subprocess_shell": "starts a process",
    "posix_spawn": "starts a process",
    "forkpty": "starts a process",
    # A command line built to run Python (an MCP server over stdio, a CLI): it will run.
    "executable": "starts a process",
}
# A test module that imports from these (by module name prefix: tools.sandbox_status too)
# is about what they start, every test of it.
SLOW_IMPORTS = {"tools.sandbox": "runs programs in bubblewrap"}
SLOW_MARKERS = ("slow", "postgres", "embedded", "browser")
# Fixtures that stand for a service, and the marker their users get.
SLOW_FIXTURES = {"postgres_server_url": "postgres", "browser": "browser"}

# One-time probes of what the machine can do, cached for the process: whichever test
# happens to ask first (or first after a test cleared the cache) is not starting them.
# A tool's libraries are imported once when it is registered (Tool.requires), and some
# ask the system on import (asyncssh looks for liboqs with ctypes: ldconfig, gcc).
PROBES = {("tools.sandbox_status", "sandbox_status"), ("tools.registry", "_missing_requirement")}

PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec"}
    | {"os.spawn"}
)


# ---------------------------------------------------------------- at collection


def mark_slow_tests(items: Iterable[pytest.Item]) -> None:
    """Give every test of the slow tier the ``slow`` marker (see the module's doc)."""
    for item in items:
        for fixture, marker in SLOW_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        reason = slow_reason(item)
        if reason is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow(reason=reason))


def slow_reason(item: pytest.Item) -> str | None:
    """Why ``item`` belongs to the slow tier, or ``None`` if it is a fast test."""
    for name in SLOW_MARKERS:
        if item.get_closest_marker(name) is not None:
            return f"marked {name}"
    module = getattr(item, "module", None)
    if module is not None:
        for value in vars(module).values():
            source = getattr(value, "__module__", None)
            for prefix, reason in SLOW_IMPORTS.items():
                if isinstance(source, str) and source.startswith(prefix):
                    return f"{reason} ({source})"
    for function in _functions_of(item):
        reason = _Scan().function(function)
        if reason is not None:
            return reason
    return None


def _functions_of(item: pytest.Item) -> Iterator[Any]:
    """The test function and the functions of every fixture it uses."""
    function = getattr(item, "function", None)
    if function is not None:
        yield function
    info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        for definition in definitions:
            if str(getattr(definition.func, "__module__", "")).startswith("tests"):
                yield definition.func


_verdicts: dict[CodeType, str | None] = {}


class _Scan:
    """Follows the names a piece of test code uses, through the ``tests`` package."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def function(self, function: Any) -> str | None:
        function = inspect.unwrap(getattr(function, "__func__", function))
        if not isinstance(function, FunctionType):
            return None
        return self.code(function.__code__, function.__globals__)

    def code(self, code: CodeType, namespace: dict[str, Any]) -> str | None:
        if code in _verdicts:
            return _verdicts[code]
        if id(code) in self.seen:  # recursion: decided by the first visit
            return None
        self.seen.add(id(code))
        verdict = self._names(_all_names(code), namespace)
        _verdicts[code] = verdict
        return verdict

    def _names(self, names: set[str], namespace: dict[str, Any]) -> str | None:
        for name in sorted(names & SLOW_NAMES.keys()):
            return f"{SLOW_NAMES[name]} ({name})"
        # Modules the code imports itself (``from x import y`` inside a function): the
        # names it takes from them are looked up there.
        sources: list[ModuleType] = [sys.modules[n] for n in names if n in sys.modules]
        sources += [v for n in names if isinstance(v := namespace.get(n), ModuleType)]
        for name in names:
            if name in namespace:
                found = [namespace[name]]
            elif name in sys.modules:  # imported inside the function
                found = [sys.modules[name]]
            else:
                found = [getattr(m, name) for m in sources if _owns(m, name)]
            for value in found:
                reason = self._object(value)
                if reason is not None:
                    return reason
        return None

    def _object(self, value: Any) -> str | None:
        if isinstance(value, ModuleType):
            return _slow_module(value.__name__)
        value = inspect.unwrap(getattr(value, "__func__", value))
        module = getattr(value, "__module__", None)
        if not isinstance(module, str) or not isinstance(value, FunctionType | type):
            return None
        reason = _slow_module(module)
        if reason is not None or not module.startswith("tests"):
            return reason
        if isinstance(value, FunctionType):
            return self.function(value)
        for cls in value.__mro__:
            if cls.__module__.startswith("tests"):
                for member in vars(cls).values():
                    reason = self.function(getattr(member, "fget", member))
                    if reason is not None:
                        return reason
        return None


def _owns(module: ModuleType, name: str) -> bool:
    return module.__name__.startswith("tests") and hasattr(module, name)


def _slow_module(name: str) -> str | None:
    for root, reason in SLOW_MODULES.items():
        if name == root or name.startswith(root + "."):
            return f"{reason} ({name})"
    return None


def _all_names(code: CodeType) -> set[str]:
    """The global and attribute names ``code`` uses, nested functions included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _all_names(const)
    return names


# ---------------------------------------------------------------- while tests run

_started: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _started is not None and event in PROCESS_EVENTS and not _probing():
        _started.append(_describe(event, args))


def _probing() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) in PROBES:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _describe(event: str, args: tuple[Any, ...]) -> str:
    # (Never the environment: it may hold secrets.)
    if event == "subprocess.Popen":
        command: Any = args[1] if args[1] is not None else args[0]
    elif event in ("os.system", "os.fork", "os.forkpty"):
        command = args[0] if args else event
    else:
        command = args[1] if len(args) > 1 else args[0]
    if isinstance(command, list | tuple):
        command = " ".join(str(part) for part in command)
    return f"{event}: {str(command)[:160]}"


_hooked = False


def watch_processes(item: pytest.Item) -> None:
    """From now on, record the processes started, if ``item`` is a fast-tier test."""
    global _started, _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    # (The keyword, not only the marker: anyio's plugin replaces an async test marked
    # ``anyio`` at collection by a new item per backend, which keeps only the keywords.)
    slow = item.get_closest_marker("slow") is not None or "slow" in item.keywords
    _started = None if slow else []


def fast_test_started() -> list[str]:
    """The processes started since :func:`watch_processes` by a fast-tier test; stops
    recording."""
    global _started
    started, _started = _started or [], None
    return started
