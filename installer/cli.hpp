#pragma once
// The installer's part of the `nymph` command line: the `install`, `launches` (with `prune`) and `kill`
// subcommands. main.cpp registers them and, after parsing, lets them run.
#include <memory>
#include <optional>

namespace CLI {
class App;
}

namespace nymph::installer {

// Owns the option values the subcommands are parsed into (CLI11 binds them by reference).
class Commands {
 public:
  virtual ~Commands() = default;
  // After app.parse(): when install, launches or kill was selected, runs it (printing to stdout/stderr) and
  // returns its exit status (0 ok, 1 failed); nullopt when another subcommand was selected. Never throws.
  virtual std::optional<int> run() = 0;
};

// Adds `install`, `launches` (+ `launches prune`) and `kill` to `app`. Keep the result alive until run().
std::unique_ptr<Commands> register_cli(CLI::App& app);

}  // namespace nymph::installer
