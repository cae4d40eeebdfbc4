// deepinfer: the command-line entry point. Subcommands live in cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <map>

#include "api/cli/command.h"
#include "core/status.h"

namespace deepinfer::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> specs;
  return specs;
}
}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  using namespace deepinfer::cli;
  CLI::App app{"deepinfer: inference engine for the DeepSeek-V4 model family"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepinfer 0.1.0");
  auto specs = command_registry();
  std::sort(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, CommandFn> runners;
  for (auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    runners[sub] = spec.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const deepinfer::Error& e) {
    std::fprintf(stderr, "deepinfer: error (%s): %s\n", deepinfer::error_code_name(e.code()),
                 e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 2;
  }
  return 1;
}
