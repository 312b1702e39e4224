#include "runners/profile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace nymph::runners {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

bool valid_profile_name(std::string_view n) {
  auto ok = [](char c, bool first) {
    bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    return alnum || (!first && (c == '_' || c == '.' || c == '-'));
  };
  if (n.empty() || n.size() > 64) return false;
  for (std::size_t i = 0; i < n.size(); ++i)
    if (!ok(n[i], i == 0)) return false;
  return true;
}

// A name or value for a message: control characters and non-ASCII bytes escaped, at most 80 bytes.
std::string shown(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

// The first array/object in `v` with more than kMaxResultElements entries, nesting deeper than `depth`, or a
// number too large for a double (Boost.JSON reads 1e400 as infinity, which JSON cannot express).
std::optional<std::string> result_shape_problem(const json::value& v, int depth) {
  if (depth > kMaxResultDepth) return "nested deeper than " + std::to_string(kMaxResultDepth) + " levels";
  if (v.is_double() && !std::isfinite(v.get_double())) return "a number is too large to represent";
  if (const auto* a = v.if_array()) {
    if (a->size() > kMaxResultElements)
      return "an array has " + std::to_string(a->size()) + " elements (at most " + std::to_string(kMaxResultElements) + ")";
    for (const auto& e : *a)
      if (auto p = result_shape_problem(e, depth + 1)) return p;
  } else if (const auto* o = v.if_object()) {
    if (o->size() > kMaxResultElements)
      return "an object has " + std::to_string(o->size()) + " members (at most " + std::to_string(kMaxResultElements) + ")";
    for (const auto& kv : *o)
      if (auto p = result_shape_problem(kv.value(), depth + 1)) return p;
  }
  return std::nullopt;
}

}  // namespace

const Profile* ProfileCatalog::find(std::string_view name) const {
  auto it = std::find_if(profiles_.begin(), profiles_.end(), [&](const Profile& p) { return p.name == name; });
  return it == profiles_.end() ? nullptr : &*it;
}

Result<void> check_profile_script(const Profile& p) {
  const std::string who = "profile " + p.name + ": script " + p.script.string();
  if (!p.script.is_absolute()) return fail(who + ": the path must be absolute");
  struct stat st {};
  if (::stat(p.script.c_str(), &st) != 0) return fail(who + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(who + ": not a regular file");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fail(who + ": writable by " + std::string(st.st_mode & S_IWGRP ? "group" : "others") +
                " (approved scripts must not be; chmod go-w)");
  return {};
}

Result<void> check_profiles(const ProfileCatalog& catalog) {
  std::set<std::string, std::less<>> seen;
  for (const auto& p : catalog.profiles()) {
    if (!valid_profile_name(p.name))
      return fail("profile " + shown(p.name) + ": names are 1-64 letters, digits, '_', '.', '-', starting with a letter or digit");
    if (!seen.insert(p.name).second) return fail("profile " + p.name + ": defined more than once");
    if (auto r = check_profile_script(p); !r) return r;
  }
  return {};
}

Result<const Profile*> resolve_training(const ProfileCatalog& catalog, const JobSpec& spec) {
  if (spec.kind != "training") return fail("not a training job (kind " + shown(spec.kind) + ")");
  if (!spec.profile || spec.profile->empty()) return fail("training job without a profile name");
  if (!spec.argv.empty() || spec.command) return fail("a training job takes a profile and parameters, not argv or command");
  if (!spec.env.empty())
    return fail("a training job takes parameters, not environment variables (got " + shown(spec.env.begin()->first) + ")");
  const Profile* p = catalog.find(*spec.profile);
  if (!p) return fail("unknown training profile " + shown(*spec.profile) + ": this worker has no such approved profile");
  if (auto r = check_profile_script(*p); !r) return r.error();
  return p;
}

Result<std::string> render_input(const Profile& p, const json::value& parameters) {
  const json::object* params = parameters.if_object();
  json::object empty;
  if (parameters.is_null()) params = &empty;  // no parameters at all: {}
  if (!params) return fail("parameters must be a JSON object");
  if (!p.allowed_parameters.empty()) {
    for (const auto& kv : *params) {
      std::string_view key(kv.key().data(), kv.key().size());
      if (std::find(p.allowed_parameters.begin(), p.allowed_parameters.end(), key) == p.allowed_parameters.end())
        return fail("parameter " + shown(key) + " is not allowed by profile " + p.name);
    }
  }
  std::string text = json::serialize(*params);
  if (text.size() > p.max_input_bytes)
    return fail("parameters are " + std::to_string(text.size()) + " bytes of JSON; profile " + p.name + " accepts at most " +
                std::to_string(p.max_input_bytes));
  return text;
}

Result<void> write_input(const fs::path& dir, const std::string& text) {
  const fs::path path = dir / kInputFile;
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail("cannot create " + path.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return fail("cannot write " + path.string() + ": " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return fail("cannot write " + path.string() + ": " + std::strerror(errno));
  return {};
}

Result<json::value> check_result(std::string_view text, std::size_t max_bytes) {
  if (text.size() > max_bytes)
    return fail("result.json is " + std::to_string(text.size()) + " bytes (at most " + std::to_string(max_bytes) + ")");
  json::parse_options opts;
  opts.max_depth = kMaxResultDepth + 1;
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, opts);
  if (ec == json::error::too_deep) return fail("result.json is nested deeper than " + std::to_string(kMaxResultDepth) + " levels");
  if (ec) return fail("result.json is not valid JSON: " + ec.message());
  if (auto problem = result_shape_problem(v, 1)) return fail("result.json: " + *problem);
  return v;
}

Result<json::value> read_result(const fs::path& dir, std::size_t max_bytes) {
  const fs::path path = dir / kResultFile;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return fail("the profile wrote no result.json");
  if (fd < 0) return fail("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path.string() + " is not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return fail("result.json is " + std::to_string(st.st_size) + " bytes (at most " + std::to_string(max_bytes) + ")");
  }
  std::string text(max_bytes + 1, '\0');
  std::size_t used = 0;
  for (;;) {
    ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return fail("cannot read " + path.string() + ": " + why);
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
    if (used == text.size()) break;  // grew past the bound while we read it
  }
  ::close(fd);
  text.resize(used);
  return check_result(text, max_bytes);
}

JobUpdate attach_result(JobUpdate u, const fs::path& dir) {
  u.result.reset();
  if (u.state != JobState::succeeded) return u;
  auto r = read_result(dir);
  if (r) {
    u.result = std::move(*r);
    return u;
  }
  u.state = JobState::failed;
  u.message = (u.message.empty() ? std::string("the profile succeeded") : u.message) + ", but " + r.error().message;
  return u;
}

}  // namespace nymph::runners
