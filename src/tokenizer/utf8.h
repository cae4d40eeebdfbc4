// UTF-8 helpers shared by the tokenizer: strict decoding, Rust-compatible lossy conversion (HF
// tokenizers decodes bytes with String::from_utf8_lossy, so we must replace exactly the same
// ill-formed subsequences), and the incomplete-tail test used by streaming detokenization.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Decodes the code point starting at s[i]. Returns its byte length (1..4), or 0 when the bytes at
// i do not start a well-formed sequence (overlong, surrogate, > U+10FFFF, truncated).
size_t utf8_decode(std::string_view s, size_t i, char32_t* cp);

// Appends the UTF-8 encoding of cp (which must be a scalar value).
void utf8_append(std::string& out, char32_t cp);

// True when s is well-formed UTF-8; otherwise *bad_at (if given) is the first bad byte offset.
bool utf8_valid(std::string_view s, size_t* bad_at = nullptr);

// Appends bytes to out, replacing each maximal ill-formed subpart with U+FFFD, exactly like Rust's
// String::from_utf8_lossy.
void utf8_append_lossy(std::string& out, std::string_view bytes);
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix of bytes after which the rest is a proper prefix of a well-formed
// sequence (a character still waiting for continuation bytes). bytes.size() if there is none.
size_t utf8_stable_prefix(std::string_view bytes);

}  // namespace deepinfer::tokenizer
