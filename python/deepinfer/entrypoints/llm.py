"""vLLM-style module path: ``from deepinfer.entrypoints.llm import LLM``."""

from deepinfer._deepinfer import LLM  # noqa: F401

__all__ = ["LLM"]
