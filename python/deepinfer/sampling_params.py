"""vLLM-style module path: ``from deepinfer.sampling_params import SamplingParams``."""

from deepinfer._deepinfer import SamplingParams  # noqa: F401

__all__ = ["SamplingParams"]
