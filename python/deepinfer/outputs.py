"""vLLM-style module path: ``from deepinfer.outputs import RequestOutput, CompletionOutput``."""

from deepinfer._deepinfer import CompletionOutput, RequestOutput  # noqa: F401

__all__ = ["RequestOutput", "CompletionOutput"]
