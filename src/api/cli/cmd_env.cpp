// `deepinfer env`: the DEEPINFER_* environment variables, their values and documentation.
#include <cstdio>
#include <cstdlib>

#include "api/cli/command.h"
#include "core/env.h"

namespace deepinfer::cli {
namespace {

CommandRegistrar reg("env", "List DEEPINFER_* environment variables (--markdown: docs/env.md)",
                     [](CLI::App& sub) -> CommandFn {
                       auto markdown = std::make_shared<bool>(false);
                       sub.add_flag("--markdown", *markdown, "print docs/env.md");
                       return [markdown] {
                         if (*markdown) {
                           std::fputs(env::markdown().c_str(), stdout);
                           return 0;
                         }
                         for (const auto& v : env::registry()) {
                           const char* cur = std::getenv(std::string(v.name).c_str());
                           std::printf("%-40s = %-10s (default %s)\n    %s\n",
                                       std::string(v.name).c_str(), cur ? cur : "<unset>",
                                       std::string(v.default_value).c_str(),
                                       std::string(v.doc).c_str());
                         }
                         return 0;
                       };
                     });

}  // namespace
}  // namespace deepinfer::cli
