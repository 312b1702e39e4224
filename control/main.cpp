// nymph-control: the reference control plane and its admin CLI. Composition root only.
#include <iostream>

#include <CLI/CLI.hpp>

#include "nymph/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"nymph-control - reference control plane for nymph agents", "nymph-control"};
  app.set_version_flag("--version", std::string("nymph-control ") + nymph::kVersion);
  app.require_subcommand(1);
  for (auto [name, help] : {std::pair{"serve", "Serve the /v1 protocol over HTTP(S) with a SQLite database"},
                            {"token", "Create API tokens (token create --role agent|admin)"},
                            {"submit", "Submit a job"},
                            {"jobs", "List jobs"},
                            {"job", "Show one job with its attempts and events"},
                            {"logs", "Print (or follow) a job's logs"},
                            {"cancel", "Cancel a job"},
                            {"workers", "List workers"},
                            {"kill", "Tell a worker to stop"}}) {
    app.add_subcommand(name, help)->allow_extras();
  }
  CLI11_PARSE(app, argc, argv);
  std::cerr << "nymph-control " << app.get_subcommands().front()->get_name()
            << ": not implemented yet in this version (" << nymph::kVersion << ")\n";
  return 2;
}
