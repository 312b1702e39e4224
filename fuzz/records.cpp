// Fuzz target: the records nymph writes and reads back from disk, which another process, a crash or a person may
// have left in any state: launch.json and status.json (installer/launch_record.hpp), manager.json (the manager
// lease, agent/manager_lease.hpp), the Slurm runner's journal (runners/slurm/journal.hpp) and a training
// profile's result.json (runners/profile.hpp). The first byte picks the record, the rest is the file's text.
// Properties: a launch record and a lease round-trip (parse -> write -> parse gives the same record); a journal
// that reads rewrites (compact_journal) to one that reads to the same entries; an accepted result.json is
// JSON the control plane accepts in an event, equal to it once re-serialized, with only finite numbers.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "agent/manager_lease.hpp"
#include "fuzz/check.hpp"
#include "installer/launch_record.hpp"
#include "protocol/json.hpp"
#include "runners/profile.hpp"
#include "runners/slurm/journal.hpp"

namespace {

using namespace nymph;
namespace json = boost::json;
namespace fs = std::filesystem;

void check_launch_record(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec);
  if (ec) return;
  auto record = installer::launch_record_from_json(v);
  if (!record) return;
  std::string written = json::serialize(installer::to_json(*record));
  auto again = installer::launch_record_from_json(json::parse(written));
  NYMPH_FUZZ_CHECK(again.has_value());
  NYMPH_FUZZ_CHECK(json::serialize(installer::to_json(*again)) == written);
}

void check_status(std::string_view text) {
  auto status = installer::parse_status(text);
  if (status) NYMPH_FUZZ_CHECK(!status->state.empty());
}

void check_lease(std::string_view text) {
  auto lease = agent::parse_lease(text);
  if (!lease) return;
  auto again = agent::parse_lease(agent::lease_json(*lease));
  NYMPH_FUZZ_CHECK(again.has_value());
  NYMPH_FUZZ_CHECK(*again == *lease);
}

// A file of this process for the journal's text (read_journal reads a path).
fs::path scratch_journal() {
  fs::path dir = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  return dir / ("nymph-fuzz-journal-" + std::to_string(::getpid()) + ".jsonl");
}

void check_journal(std::string_view text) {
  static const fs::path path = scratch_journal();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
  auto entries = runners::slurm::read_journal(path);
  if (!entries) return;
  for (const auto& e : *entries) NYMPH_FUZZ_CHECK(!e.job_id.empty() && !e.slurm_job_id.empty());
  NYMPH_FUZZ_CHECK(runners::slurm::compact_journal(path, *entries).has_value());
  auto again = runners::slurm::read_journal(path);
  NYMPH_FUZZ_CHECK(again.has_value());
  NYMPH_FUZZ_CHECK(*again == *entries);
}

bool all_finite(const json::value& v) {
  if (v.is_double()) return std::isfinite(v.get_double());
  if (v.is_array()) {
    for (const auto& x : v.get_array())
      if (!all_finite(x)) return false;
  }
  if (v.is_object()) {
    for (const auto& m : v.get_object())
      if (!all_finite(m.value())) return false;
  }
  return true;
}

// Equal JSON values, doubles within 2 ulp: Boost.JSON 1.81 does not read every shortest-form double back exactly
// ("1.2E221"; correctly rounded parsing came with 1.83). Known, not fixed (fuzz/README.md).
bool same_json(const json::value& a, const json::value& b) {
  if (a.is_double() && b.is_double()) {
    double x = a.get_double(), y = b.get_double();
    return x == y || std::nextafter(std::nextafter(x, y), y) == y || std::nextafter(x, y) == y;
  }
  if (a.is_array() && b.is_array()) {
    const auto &p = a.get_array(), &q = b.get_array();
    if (p.size() != q.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (!same_json(p[i], q[i])) return false;
    return true;
  }
  if (a.is_object() && b.is_object()) {
    const auto &p = a.get_object(), &q = b.get_object();
    if (p.size() != q.size()) return false;
    for (const auto& m : p) {
      const auto* other = q.if_contains(m.key());
      if (!other || !same_json(m.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

void check_result(std::string_view text) {
  auto result = runners::check_result(text);
  if (!result) return;
  NYMPH_FUZZ_CHECK(all_finite(*result));
  std::string sent = json::serialize(*result);
  auto received = protocol::parse_json(sent);
  NYMPH_FUZZ_CHECK(received.has_value());
  NYMPH_FUZZ_CHECK(same_json(*received, *result));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0: check_launch_record(text); break;
    case 1: check_status(text); break;
    case 2: check_lease(text); break;
    case 3: check_journal(text); break;
    default: check_result(text); break;
  }
  return 0;
}
