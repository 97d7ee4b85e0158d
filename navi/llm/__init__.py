"""Navi's LLM backends: Ollama, any OpenAI-compatible server, or an embedded model.

Everything above this package speaks only the neutral types of ``navi.llm.types`` and
the ``LLMBackend`` contract of ``navi.llm.base``; ``navi.llm.selection`` picks the
backend. Each module is imported where it is used: importing one backend does not load
the others.
"""
