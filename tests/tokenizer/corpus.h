// The tokenizer test / benchmark corpus: text already on the machine (licenses, X11 compose
// tables, the public suffix list with IDNs in many scripts, CJK samples from Python's test data,
// our own sources) plus our multilingual file and generated edge cases (digit and whitespace
// runs, CR/LF, emoji ZWJ sequences and flags, combining marks, controls, special tokens in text).
#pragma once

#include <string>
#include <vector>

namespace deepinfer::tokenizer::testing {

struct Corpus {
  std::vector<std::string> docs;     // each valid UTF-8, at most ~4 KB
  std::vector<std::string> sources;  // files that contributed
  size_t chars = 0;                  // Unicode scalar values over all docs
  size_t bytes = 0;
};

// `source_dir` is the repository root. Deterministic for a given machine image.
Corpus build_corpus(const std::string& source_dir);

// The generated edge cases alone (also part of build_corpus); they include random_unicode_docs().
std::vector<std::string> edge_case_docs();
// Characters whose handling depends on Unicode versions: recently assigned ones (Unicode 15-17)
// and random code points from many blocks and from all planes.
std::vector<std::string> random_unicode_docs();

}  // namespace deepinfer::tokenizer::testing
