#!/usr/bin/env python3
"""Step 2: a byte-level BPE tokenizer in DeepSeek-V3/V4 form, trained with HF `tokenizers`.

The tokenizer.json has the same structure as DeepSeek-V3's own: an empty normalizer, the
three-pass DeepSeek pre-tokenizer (digit groups of 1-3, CJK/kana runs, the main split regex)
followed by ByteLevel without its regex, BPE without unk/byte-fallback, ByteLevel
post-processor and decoder. BOS is added by the caller (tokenizer_config: add_bos_token),
exactly as for the real checkpoints.

Special tokens take ids 0..6, in DeepSeek's order for the first three:
  0 <｜begin▁of▁sentence｜>  1 <｜end▁of▁sentence｜>  2 <｜▁pad▁｜>   (special)
  3 <｜User｜>  4 <｜Assistant｜>  5 <think>  6 </think>            (added, not special, as in V3.1)

usage: train_tokenizer.py --train work/corpus/train.txt --out DIR [--vocab 8192]
"""
import argparse
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
USER, ASSISTANT, THINK, END_THINK = "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"
SPECIAL = [BOS, EOS, PAD, USER, ASSISTANT, THINK, END_THINK]
NOT_SPECIAL = {USER, ASSISTANT, THINK, END_THINK}

# DeepSeek-V3's pre-tokenizer regexes, verbatim.
DIGITS = r"\p{N}{1,3}"
CJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
MAIN = (
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

# DeepSeek-V3.1/V4-style chat template (system prompt, user/assistant turns, non-thinking
# `</think>` prefix or thinking `<think>` prefix for the generation prompt). One line, no
# whitespace between tags, so it renders the same with or without trim_blocks.
CHAT_TEMPLATE = (
    "{%- if not add_generation_prompt is defined %}{%- set add_generation_prompt = false %}{%- endif %}"
    "{%- if not thinking is defined %}{%- set thinking = false %}{%- endif %}"
    "{%- set ns = namespace(system_prompt='', is_first_sp=true) %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{%- if ns.is_first_sp %}{%- set ns.system_prompt = ns.system_prompt + message['content'] %}"
    "{%- set ns.is_first_sp = false %}"
    "{%- else %}{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{{- bos_token }}{{- ns.system_prompt }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{- '<｜User｜>' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "{{- '<｜Assistant｜></think>' + content + '<｜end▁of▁sentence｜>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{%- if thinking %}{{- '<｜Assistant｜><think>' }}{%- else %}{{- '<｜Assistant｜></think>' }}{%- endif %}"
    "{%- endif %}"
)


def iter_docs(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for doc in text.split("\n\n"):
        if doc.strip():
            yield doc


def build(train_path, vocab_size):
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(DIGITS), behavior="isolated", invert=False),
            pre_tokenizers.Split(Regex(CJK), behavior="isolated", invert=False),
            pre_tokenizers.Split(Regex(MAIN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(iter_docs(train_path), trainer=trainer)
    return tok


def finalize_json(tok):
    """Make the serialized form match DeepSeek-V3's tokenizer.json field for field."""
    j = json.loads(tok.to_str())
    for a in j["added_tokens"]:
        if a["content"] in NOT_SPECIAL:
            a["special"] = False
            a["normalized"] = True
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    assert j["pre_tokenizer"]["pretokenizers"][2]["pattern"]["Regex"] == MAIN
    for i, s in enumerate(SPECIAL):
        assert j["model"]["vocab"][s] == i, (s, j["model"]["vocab"].get(s))
    return j


def tokenizer_config(vocab_size):
    def tokcfg(s, special):
        return {"content": s, "lstrip": False, "normalized": not special, "rstrip": False,
                "single_word": False, "special": special}

    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": {str(i): tokcfg(s, s not in NOT_SPECIAL) for i, s in enumerate(SPECIAL)},
        "chat_template": CHAT_TEMPLATE,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=8192)
    args = ap.parse_args()

    tok = build(args.train, args.vocab)
    j = finalize_json(tok)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=2)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(args.vocab), f, ensure_ascii=False, indent=2)

    # Reload and check the round trip and the special ids.
    t2 = Tokenizer.from_file(path)
    assert t2.get_vocab_size() == args.vocab, t2.get_vocab_size()
    sample = 'The jury said, "It is 1961." <｜User｜>Hi<｜Assistant｜></think>Hello<｜end▁of▁sentence｜>'
    enc = t2.encode(sample, add_special_tokens=False)
    back = t2.decode(enc.ids, skip_special_tokens=False)
    if back != sample:
        print(f"WARNING: decode(encode(x)) != x: {back!r}")
    for i, s in enumerate(SPECIAL):
        assert t2.token_to_id(s) == i
    n_tokens = sum(len(e.ids) for e in t2.encode_batch(list(iter_docs(args.train)), add_special_tokens=False))
    n_words = len(open(args.train, encoding="utf-8").read().split())
    print(f"tokenizer: vocab {t2.get_vocab_size()}, train {n_tokens} tokens ({n_tokens / n_words:.3f}/word)")
    print("sample:", enc.tokens[:24])


if __name__ == "__main__":
    main()
