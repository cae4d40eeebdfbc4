// `deepinfer perplexity`: held-out perplexity of a text file under a model.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "api/cli/command.h"
#include "api/perplexity.h"
#include "core/status.h"
#include "deepinfer/llm.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

struct PerplexityArgs {
  std::string model, text_file;
  int64_t ctx = 512;
  int batch = 4;
};

int run_perplexity(const PerplexityArgs& a) {
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  std::ifstream in(a.text_file, std::ios::binary);
  DI_CHECK(in.good(), ErrorCode::kNotFound, "--text-file: cannot open '{}'", a.text_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = tokenizer::Tokenizer::from_path(dir);
  DI_CHECK(tok.bos_id().has_value(), ErrorCode::kInvalidArgument,
           "the tokenizer in '{}' has no BOS token to start each chunk with", dir);
  std::vector<int32_t> ids;
  for (uint32_t id : tok.encode(ss.str(), /*add_special_tokens=*/false))
    ids.push_back(static_cast<int32_t>(id));
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(dir, *backend);
  const PerplexityResult r = perplexity(*model, ids, static_cast<int32_t>(*tok.bos_id()), a.ctx,
                                        a.batch, [](int64_t done, int64_t total) {
                                          std::fprintf(stderr, "\rscoring chunks: %lld/%lld",
                                                       (long long)done, (long long)total);
                                          if (done == total) std::fputc('\n', stderr);
                                        });
  std::printf("tokens %lld  chunks %lld  mean_nll %.6f  ppl %.4f\n", (long long)r.tokens,
              (long long)r.chunks, r.mean_nll(), r.ppl());
  return 0;
}

CommandRegistrar reg(
    "perplexity", "Perplexity of a text file: [BOS] + chunks of ctx-1 tokens, scored alone",
    [](CLI::App& sub) -> CommandFn {
      auto a = std::make_shared<PerplexityArgs>();
      sub.add_option("--model", a->model, "checkpoint directory (default: the bundled model)");
      sub.add_option("--text-file", a->text_file, "UTF-8 text")->required();
      sub.add_option("--ctx", a->ctx, "tokens per scored sequence, BOS included")
          ->capture_default_str();
      sub.add_option("--batch", a->batch, "chunks per forward")->capture_default_str();
      return [a] { return run_perplexity(*a); };
    });

}  // namespace
}  // namespace deepinfer::cli
