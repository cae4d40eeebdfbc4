// Subcommands of the `deepinfer` CLI register themselves here: each cmd_*.cpp defines a
// CommandRegistrar that adds its CLI11 subcommand and returns the function to run.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::cli {

using CommandFn = std::function<int()>;
// Adds the subcommand's options to `sub` and returns what runs when it is chosen.
using SetupFn = std::function<CommandFn(CLI::App& sub)>;

struct CommandSpec {
  std::string name;
  std::string description;
  SetupFn setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, SetupFn setup) {
    command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace deepinfer::cli
