// The env registry is the single declaration of every DEEPINFER_* variable; docs/env.md must match.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/env.h"
#include "core/status.h"

using namespace deepinfer;

TEST(Env, DocsMatchRegistry) {
  std::ifstream f(std::string(DEEPINFER_SOURCE_DIR) + "/docs/env.md");
  ASSERT_TRUE(f.good()) << "docs/env.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), env::markdown())
      << "docs/env.md is stale: regenerate it with `deepinfer env --markdown > docs/env.md`";
}

TEST(Env, SourceReadsOnlyDeclaredVariables) {
  // Every DEEPINFER_ name mentioned in src/ must be declared (catches getenv bypassing the
  // registry).
  std::set<std::string> declared;
  for (const auto& v : env::registry()) declared.insert(std::string(v.name));
  const std::string cmd = std::string("grep -rhoE 'DEEPINFER_[A-Z0-9_]+' ") + DEEPINFER_SOURCE_DIR +
                          "/src --include=*.cpp --include=*.h --include=*.cu --include=*.cuh";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256];
  // Compile-time macros that are not environment variables.
  // Compile definitions and CMake options, not environment variables.
  const std::set<std::string> not_env = {"DEEPINFER_HAVE_TOKENIZER",  "DEEPINFER_HAVE_CUDA",
                                         "DEEPINFER_BENCH_HAVE_CUDA", "DEEPINFER_SOURCE_DIR",
                                         "DEEPINFER_BINARY_DIR",      "DEEPINFER_CUDA",
                                         "DEEPINFER_SANITIZE"};
  while (fgets(buf, sizeof buf, p)) {
    std::string name(buf);
    name.erase(name.find_last_not_of("\n") + 1);
    if (not_env.count(name)) continue;
    EXPECT_TRUE(declared.count(name)) << name << " is used in src/ but not declared in env.cpp";
  }
  pclose(p);
}

TEST(Env, TypedReadsAndErrors) {
  setenv("DEEPINFER_NUM_THREADS", "3", 1);
  EXPECT_EQ(env::get_int("DEEPINFER_NUM_THREADS"), 3);
  setenv("DEEPINFER_NUM_THREADS", "three", 1);
  try {
    env::get_int("DEEPINFER_NUM_THREADS");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DEEPINFER_NUM_THREADS"), std::string::npos);
  }
  unsetenv("DEEPINFER_NUM_THREADS");
  EXPECT_EQ(env::get_int("DEEPINFER_NUM_THREADS"), 0);
  EXPECT_THROW(env::get_int("DEEPINFER_NOT_A_VARIABLE"), Error);
}
