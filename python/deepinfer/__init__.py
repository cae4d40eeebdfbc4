"""deepinfer: an inference engine for the DeepSeek-V4 model family.

    from deepinfer import LLM, SamplingParams
    llm = LLM()  # the bundled tiny model; or LLM(model="/path/to/DeepSeek-V4-Flash")
    outputs = llm.generate(["It was a cold night, and"],
                           SamplingParams(temperature=0.7, max_tokens=64, seq_seed=42))
    print(outputs[0].outputs[0].text)
"""

from deepinfer._deepinfer import (  # noqa: F401
    LLM,
    CompletionOutput,
    Logprob,
    RequestMetrics,
    RequestOutput,
    SamplingParams,
    default_model_dir,
)

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob",
           "RequestMetrics", "default_model_dir"]
__version__ = "0.1.0"
