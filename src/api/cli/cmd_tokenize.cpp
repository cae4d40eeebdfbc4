// `deepinfer tokenize` and `deepinfer detokenize`: batch text <-> token ids through a HF
// tokenizer.json. JSON in, JSON out ("-" means stdin / stdout):
//   tokenize:   ["text", ...]        ->  [[id, ...], ...]
//   detokenize: [[id, ...], ...]     ->  ["text", ...]
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "api/cli/command.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using nlohmann::json;

struct Options {
  std::string tokenizer, input, output;
  bool special = false;
};

json read_json(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(path, std::ios::binary);
    DI_CHECK(in.good(), ErrorCode::kNotFound, "cannot open input {}", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "input {} is not valid JSON: {}", path, e.what());
  }
}

void write_json(const std::string& path, const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  DI_CHECK(out.good(), ErrorCode::kInvalidArgument, "cannot write output {}", path);
  out << text;
  DI_CHECK(out.good(), ErrorCode::kInvalidArgument, "failed writing output {}", path);
}

void add_common(CLI::App& sub, Options& o) {
  sub.add_option("--tokenizer", o.tokenizer, "directory with tokenizer.json, or the file itself")
      ->required();
  sub.add_option("--input-json", o.input, "input JSON file ('-' for stdin)")->required();
  sub.add_option("--output-json", o.output, "output JSON file ('-' for stdout)")->required();
}

int run_tokenize(const Options& o) {
  auto tok = tokenizer::Tokenizer::from_path(o.tokenizer);
  json in = read_json(o.input);
  DI_CHECK(in.is_array(), ErrorCode::kInvalidArgument, "input {} must be a JSON array of strings",
           o.input);
  json out = json::array();
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < in.size(); ++i) {
    DI_CHECK(in[i].is_string(), ErrorCode::kInvalidArgument, "input {}: element {} is not a string",
             o.input, i);
    ids.clear();
    tok.encode_into(in[i].get_ref<const std::string&>(), o.special, ids);
    out.push_back(ids);
  }
  write_json(o.output, out);
  return 0;
}

int run_detokenize(const Options& o) {
  auto tok = tokenizer::Tokenizer::from_path(o.tokenizer);
  json in = read_json(o.input);
  DI_CHECK(in.is_array(), ErrorCode::kInvalidArgument,
           "input {} must be a JSON array of arrays of token ids", o.input);
  json out = json::array();
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < in.size(); ++i) {
    DI_CHECK(in[i].is_array(), ErrorCode::kInvalidArgument,
             "input {}: element {} is not an array of token ids", o.input, i);
    ids.clear();
    for (const json& v : in[i]) {
      DI_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= UINT32_MAX,
               ErrorCode::kInvalidArgument, "input {}: element {} holds a bad token id {}", o.input,
               i, v.dump());
      ids.push_back(v.get<uint32_t>());
    }
    out.push_back(tok.decode(ids, o.special));
  }
  write_json(o.output, out);
  return 0;
}

CommandRegistrar reg_tokenize(
    "tokenize", "Text to token ids: JSON array of strings in, array of id arrays out",
    [](CLI::App& sub) -> CommandFn {
      auto o = std::make_shared<Options>();
      add_common(sub, *o);
      sub.add_flag("--add-special", o->special,
                   "add the post-processor's special tokens (BOS per tokenizer_config.json)");
      return [o] { return run_tokenize(*o); };
    });

CommandRegistrar reg_detokenize(
    "detokenize", "Token ids to text: JSON array of id arrays in, array of strings out",
    [](CLI::App& sub) -> CommandFn {
      auto o = std::make_shared<Options>();
      add_common(sub, *o);
      sub.add_flag("--skip-special", o->special, "leave special tokens out of the text");
      return [o] { return run_detokenize(*o); };
    });

}  // namespace
}  // namespace deepinfer::cli
