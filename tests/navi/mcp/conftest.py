"""The security suite's real ``navi serve`` fixture, for the MCP tests that need one."""

from tests.security.conftest import start_module_navi, start_navi  # noqa: F401
