"""The Python API: import paths, generate/chat, and errors that name the argument."""

import pytest

import deepinfer
from deepinfer import LLM, SamplingParams
from deepinfer.entrypoints.llm import LLM as LLM2
from deepinfer.sampling_params import SamplingParams as SP2


@pytest.fixture(scope="module")
def llm():
    return LLM(expert_parallel_size=1, gpu_memory_utilization=0.9, show_progress=False)


def test_import_paths_are_the_same_classes():
    assert LLM2 is LLM
    assert SP2 is SamplingParams
    assert deepinfer.__version__


def test_generate_text_prompts(llm):
    params = SamplingParams(temperature=0.7, max_tokens=12, seq_seed=42, ignore_eos=True)
    outs = llm.generate(prompts=["It was a cold night, and", "The jury said that"],
                        sampling_params=params)
    assert len(outs) == 2
    assert outs[0].prompt == "It was a cold night, and"
    for o in outs:
        c = o.outputs[0]
        assert o.finished and c.finish_reason == "length"
        assert len(c.token_ids) == 12
        assert isinstance(c.text, str) and c.text
        assert o.prompt_token_ids[0] == 0  # BOS
    # Same seq_seed, same prompt: the same tokens, whatever else is in the batch.
    again = llm.generate("It was a cold night, and", params)
    assert again[0].outputs[0].token_ids == outs[0].outputs[0].token_ids


def test_greedy_token_ids_and_per_prompt_params(llm):
    greedy = SamplingParams(temperature=0, max_tokens=5)
    by_text = llm.generate("The jury said that", greedy)[0]
    by_ids = llm.generate([by_text.prompt_token_ids], greedy)[0]
    assert by_ids.outputs[0].token_ids == by_text.outputs[0].token_ids
    outs = llm.generate([{"prompt": "a"}, {"prompt_token_ids": [0, 480, 4639]}],
                        [SamplingParams(max_tokens=2, seq_seed=1),
                         SamplingParams(max_tokens=4, seq_seed=1, ignore_eos=True)])
    assert len(outs[0].outputs[0].token_ids) <= 2
    assert len(outs[1].outputs[0].token_ids) == 4


def test_stop_and_logprobs(llm):
    p = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, logprobs=2)
    out = llm.generate("It was a cold night, and", p)[0].outputs[0]
    assert len(out.logprobs) == len(out.token_ids)
    first = out.logprobs[0][out.token_ids[0]]
    assert first.rank == 1 and first.logprob <= 0
    assert out.cumulative_logprob == pytest.approx(
        sum(lp[t].logprob for lp, t in zip(out.logprobs, out.token_ids)), abs=1e-3)
    stop = out.text.split()[3]
    stopped = llm.generate("It was a cold night, and",
                           SamplingParams(temperature=0, max_tokens=24, stop=stop))[0].outputs[0]
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop
    assert stop not in stopped.text


def test_chat(llm):
    text = llm.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.startswith("<｜begin▁of▁sentence｜>") and "<｜User｜>Hi<｜Assistant｜>" in text
    outs = llm.chat([{"role": "user", "content": "Hi"}],
                    SamplingParams(max_tokens=3, seq_seed=3))
    assert len(outs) == 1 and len(outs[0].outputs[0].token_ids) <= 3


@pytest.mark.parametrize("kwargs, name", [
    (dict(max_tokens=-1), "max_tokens"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_k=-5), "top_k"),
])
def test_bad_sampling_params_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SamplingParams(**kwargs)


def test_unknown_model_dir():
    with pytest.raises(FileNotFoundError, match="/no/such/dir"):
        LLM(model="/no/such/dir")


def test_prompt_longer_than_the_context(llm):
    with pytest.raises(ValueError, match="max_model_len"):
        llm.generate([[5] * 100000], SamplingParams(max_tokens=1))
    # The engine keeps serving afterwards.
    assert llm.generate("Hello", SamplingParams(max_tokens=1, seq_seed=1))[0].finished


def test_bad_prompt_type(llm):
    with pytest.raises((ValueError, TypeError)):
        llm.generate([1.5])
