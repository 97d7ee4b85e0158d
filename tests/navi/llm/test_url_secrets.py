"""A base URL with ``user:password@`` reaches the LLM server, but the password never
reaches an ``llm.failed`` event, the run's failure, the event log, an export or a log line."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from events.types import LLMFailed
from navi.app import RunFailedError
from navi.replay.export import export_lines
from tests.navi.llm.raw_server import redirecting_server
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio

PASSWORD = "pw-canary-7f3a"


def with_password(url: str) -> str:
    return url.replace("http://", f"http://navi:{PASSWORD}@")


async def failed_run(tmp_path: Path, llm_url: str) -> tuple[LLMFailed, str, bytes, str]:
    """Run a turn whose LLM call fails; the ``llm.failed`` event, the run's error, the
    export and every log line of the run."""
    settings = navi_settings(tmp_path, with_password(llm_url), planning="off")
    with capture_logs() as logs:
        async with open_navi(settings) as navi:
            session = await navi.create_session("secretary")
            with anyio.fail_after(20), pytest.raises(RunFailedError) as caught:
                await navi.run(session, "hello")
            failed = [
                r.event for r in await navi.store.read(session) if isinstance(r.event, LLMFailed)
            ]
            export = b"".join([line async for line in export_lines(navi.store, session)])
    return failed[0], str(caught.value), export, repr(logs)


def assert_no_password(tmp_path: Path, *texts: str | bytes) -> None:
    for text in texts:
        assert PASSWORD not in (text if isinstance(text, str) else text.decode("utf-8", "replace"))
    for path in tmp_path.rglob("*"):  # the SQLite event log and anything else written
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


async def test_an_error_answer_names_the_server_without_the_password(tmp_path: Path) -> None:
    async with FakeLLMServer([Reply(error_before="bad request", error_status=400)]) as fake:
        failed, error, export, logs = await failed_run(tmp_path, fake.url)
        assert fake.received[-1].headers["authorization"].startswith("Basic ")  # it was used
    assert "answered HTTP 400" in failed.error and "http://***@127.0.0.1" in failed.error
    assert_no_password(tmp_path, failed.error, error, export, logs)


async def test_a_redirect_names_both_places_without_passwords(tmp_path: Path) -> None:
    target = f"https://admin:{PASSWORD}@llm.example/"
    async with redirecting_server(307, target) as url:
        failed, error, export, logs = await failed_run(tmp_path, url)
    assert failed.kind == "redirect" and not failed.retryable
    assert "answered 307 redirect to https://***@llm.example/" in failed.error
    assert "set OLLAMA_HOST to the final address" in failed.error
    assert_no_password(tmp_path, failed.error, error, export, logs)
