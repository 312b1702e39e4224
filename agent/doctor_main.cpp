#include "agent/doctor_main.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>

#include "agent/doctor.hpp"
#include "agent/manager_lease.hpp"
#include "common/cli_json.hpp"
#include "installer/plan.hpp"
#include "platform/environment.hpp"
#include "slurm/child_command_runner.hpp"

namespace nymph::agent {

namespace fs = std::filesystem;
namespace asio = boost::asio;

namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::move(fallback);
}

fs::path home() { return env_or("HOME", "/"); }

// The file given, or the per-user default the systemd unit uses when it exists.
fs::path config_path(const DoctorArgs& args) {
  if (!args.config_file.empty()) return args.config_file;
  fs::path xdg = env_or("XDG_CONFIG_HOME", (home() / ".config").string());
  fs::path p = xdg / "nymph" / "config.toml";
  std::error_code ec;
  return fs::exists(p, ec) ? p : fs::path();
}

doctor::Inputs make_inputs(const DoctorArgs& args) {
  doctor::Inputs in;
  in.config_source = config_path(args).string();
  if (!in.config_source.empty()) {
    auto c = load_config(in.config_source);
    if (c) in.config = std::move(*c);
    else in.config_error = c.error().message;
  }
  in.path_env = env_or("PATH", "/usr/bin:/bin");
  in.in_allocation = !env_or("SLURM_JOB_ID", "").empty();
  in.user = env_or("USER", env_or("LOGNAME", std::to_string(::geteuid())));
  in.state_dir = args.state_dir.empty() ? installer::default_state_dir(home()) : fs::absolute(args.state_dir);
  std::error_code ec;
  in.working_dir = fs::current_path(ec);
  if (in.config) {
    if (!in.config->manager.state_dir.empty()) in.manager_state_dir = fs::absolute(in.config->manager.state_dir, ec);
    else if (auto h = home_directory(); !h.empty())
      in.manager_state_dir = default_manager_state_dir(h, in.config->manager.cluster);
  }
  in.command_timeout = args.timeout;
  in.http_timeout = args.timeout;
  in.deep = args.deep;
  return in;
}

// The user name as the host's own name service says (`id -un` is dynamically linked against the host's
// NSS modules, which a static nymph cannot load safely); $USER when id is unavailable.
asio::awaitable<void> resolve_user(doctor::Inputs& in, slurm::CommandRunner& commands) {
  auto id = platform::find_on_path("id", in.path_env);
  if (!id) co_return;
  std::vector<std::string> argv{*id, "-un"};
  auto r = co_await commands.run(std::move(argv), std::nullopt, in.command_timeout);
  if (!r || r->exit_code != 0) co_return;
  std::string name = r->out.substr(0, r->out.find('\n'));
  if (!name.empty()) in.user = name;
}

asio::awaitable<doctor::Report> diagnose(doctor::Inputs in, slurm::CommandRunner& commands) {
  co_await resolve_user(in, commands);
  co_return co_await doctor::run_all(std::move(in), commands);
}

}  // namespace

int doctor_main(const DoctorArgs& args) {
  try {
    asio::io_context ioc;
    slurm::ChildCommandRunner commands;
    std::optional<doctor::Report> report;
    std::exception_ptr error;
    asio::co_spawn(ioc, diagnose(make_inputs(args), commands), [&](std::exception_ptr e, doctor::Report r) {
      error = e;
      if (!e) report = std::move(r);
    });
    ioc.run();
    if (error) std::rethrow_exception(error);
    if (args.json) std::cout << boost::json::serialize(doctor::to_json(*report)) << "\n";
    else std::cout << doctor::to_text(*report);
    return report->failed() ? 1 : 0;
  } catch (const std::exception& e) {
    return cli::report_failure("doctor", "internal", e.what(), args.json);
  }
}

}  // namespace nymph::agent
