// Small argument parsers shared by CLI subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::cli {

// "5,17,42" -> {5, 17, 42}; errors name the flag and the offending item.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

// "csa,hca,,sliding" -> {"csa", "hca", "sliding"} (empty items dropped).
std::vector<std::string> split_list(const std::string& text);

}  // namespace deepinfer::cli
