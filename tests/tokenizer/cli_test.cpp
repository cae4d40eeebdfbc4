// `deepinfer tokenize` / `deepinfer detokenize` end to end: JSON in, JSON out, same ids as the
// library, round trip back to the input, clear errors on bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {
namespace {

int run(const std::string& args, const std::string& stderr_file) {
  std::string cmd = std::string("'") + DEEPINFER_CLI + "' " + args + " 2>'" + stderr_file + "'";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(TokenizerCli, TokenizeDetokenizeRoundTrip) {
  REQUIRE_NODE_MODULES();
  auto dir = temp_dir();
  std::vector<std::string> docs{"Hello, world!", "",
                                "多语言 <｜User｜>hi<｜Assistant｜> 👩‍💻",
                                "  tabs\tand\r\nlines  "};
  { std::ofstream(dir / "docs.json") << json(docs).dump(); }
  std::string tok = "--tokenizer '" + deepseek_dir() + "'";
  ASSERT_EQ(run("tokenize " + tok + " --add-special --input-json '" + (dir / "docs.json").string() +
                    "' --output-json '" + (dir / "ids.json").string() + "'",
                (dir / "err.txt").string()),
            0)
      << slurp(dir / "err.txt");
  json ids = json::parse(slurp(dir / "ids.json"));
  Tokenizer t = Tokenizer::from_path(deepseek_dir());
  ASSERT_EQ(ids.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i)
    EXPECT_EQ(ids[i].get<std::vector<uint32_t>>(), t.encode(docs[i], true));
  ASSERT_EQ(
      run("detokenize " + tok + " --skip-special --input-json '" + (dir / "ids.json").string() +
              "' --output-json '" + (dir / "back.json").string() + "'",
          (dir / "err.txt").string()),
      0)
      << slurp(dir / "err.txt");
  EXPECT_EQ(json::parse(slurp(dir / "back.json")).get<std::vector<std::string>>(), docs);
}

TEST(TokenizerCli, BadInputIsAnError) {
  REQUIRE_NODE_MODULES();
  auto dir = temp_dir();
  { std::ofstream(dir / "bad.json") << R"([[1, -2]])"; }
  std::string tok = "--tokenizer '" + deepseek_dir() + "'";
  EXPECT_EQ(run("detokenize " + tok + " --input-json '" + (dir / "bad.json").string() +
                    "' --output-json -",
                (dir / "err.txt").string()),
            2);
  EXPECT_NE(slurp(dir / "err.txt").find("bad token id"), std::string::npos);
  EXPECT_EQ(run("tokenize --tokenizer /nonexistent --input-json '" + (dir / "bad.json").string() +
                    "' --output-json -",
                (dir / "err.txt").string()),
            2);
  EXPECT_NE(slurp(dir / "err.txt").find("/nonexistent"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
