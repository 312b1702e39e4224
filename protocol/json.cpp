#include "protocol/json.hpp"

#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>

#include <boost/json/error.hpp>
#include <boost/json/parse.hpp>

#include "protocol/fields.hpp"

namespace nymph::protocol {

namespace json = boost::json;

// ---------------------------------------------------------------------------------------------------------
// Decoding: one `read` overload per kind of value; the Decoder keeps the path for the error message.

namespace {

struct Decoder {
  std::vector<std::string> path;
  std::string error;

  bool fail(std::string_view what) {
    if (!error.empty()) return false;
    std::string where;
    for (const auto& p : path) {
      if (!where.empty() && p.front() != '[') where += '.';
      where += p;
    }
    error = where.empty() ? "body: " + std::string(what) : "field '" + where + "': " + std::string(what);
    return false;
  }
};

bool read(Decoder& d, const json::value& v, std::string& out) {
  if (!v.is_string()) return d.fail("expected a string");
  out.assign(v.get_string().data(), v.get_string().size());
  return true;
}

bool read(Decoder& d, const json::value& v, bool& out) {
  if (!v.is_bool()) return d.fail("expected true or false");
  out = v.get_bool();
  return true;
}

template <class Int>
bool read_integer(Decoder& d, const json::value& v, Int& out) {
  auto lo = std::numeric_limits<Int>::min();
  auto hi = std::numeric_limits<Int>::max();
  if (v.is_int64()) {
    auto x = v.get_int64();
    if ((std::is_signed_v<Int> && x < static_cast<std::int64_t>(lo)) || (!std::is_signed_v<Int> && x < 0) ||
        (x > 0 && static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(hi)))
      return d.fail("integer out of range");
    out = static_cast<Int>(x);
    return true;
  }
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<std::uint64_t>(hi)) return d.fail("integer out of range");
    out = static_cast<Int>(v.get_uint64());
    return true;
  }
  if (v.is_double()) {
    double x = v.get_double();
    if (std::trunc(x) != x) return d.fail("expected an integer");
    if (x < static_cast<double>(lo) || x > static_cast<double>(hi)) return d.fail("integer out of range");
    out = static_cast<Int>(x);
    return true;
  }
  return d.fail("expected an integer");
}

bool read(Decoder& d, const json::value& v, int& out) { return read_integer(d, v, out); }
bool read(Decoder& d, const json::value& v, std::int64_t& out) { return read_integer(d, v, out); }
bool read(Decoder& d, const json::value& v, std::uint64_t& out) { return read_integer(d, v, out); }

bool read(Decoder& d, const json::value& v, double& out) {
  if (!v.is_number()) return d.fail("expected a number");
  out = v.to_number<double>();
  if (!std::isfinite(out)) return d.fail("expected a finite number");
  // Beyond the integer types a whole number would be written back as a double, which Boost.JSON 1.81 does not
  // always read back exactly (to_value): refused, so what a peer accepted it can send on unchanged.
  if (out < -0x1p63 || out >= 0x1p64) return d.fail("number out of range");
  return true;
}

bool read(Decoder& d, const json::value& v, json::object& out) {
  if (!v.is_object()) return d.fail("expected an object");
  out = v.get_object();
  return true;
}

bool read(Decoder&, const json::value& v, json::value& out) {
  out = v;
  return true;
}

// Any wire enumeration: its names come from to_string, so the "expected ..." list is never out of date.
template <class E>
  requires std::is_enum_v<E>
bool read(Decoder& d, const json::value& v, E& out) {
  if (!v.is_string()) return d.fail("expected a string");
  std::string_view text(v.get_string().data(), v.get_string().size());
  std::string allowed;
  for (int i = 0;; ++i) {
    auto name = to_string(static_cast<E>(i));
    if (name == "?") break;
    if (name == text) {
      out = static_cast<E>(i);
      return true;
    }
    allowed += allowed.empty() ? "" : ", ";
    allowed += name;
  }
  auto last = allowed.rfind(", ");
  if (last != std::string::npos) allowed.replace(last, 2, " or ");
  return d.fail("unknown value '" + std::string(text) + "' (expected " + allowed + ")");
}

template <class T>
bool read(Decoder& d, const json::value& v, std::optional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return true;
  }
  T x{};
  if (!read(d, v, x)) return false;
  out = std::move(x);
  return true;
}

template <class T>
bool read(Decoder& d, const json::value& v, std::vector<T>& out) {
  if (!v.is_array()) return d.fail("expected an array");
  out.clear();
  out.reserve(v.get_array().size());
  std::size_t i = 0;
  for (const auto& e : v.get_array()) {
    d.path.push_back("[" + std::to_string(i++) + "]");
    T x{};
    bool ok = read(d, e, x);
    d.path.pop_back();
    if (!ok) return false;
    out.push_back(std::move(x));
  }
  return true;
}

template <class T>
bool read(Decoder& d, const json::value& v, std::map<std::string, T>& out) {
  if (!v.is_object()) return d.fail("expected an object");
  out.clear();
  for (const auto& kv : v.get_object()) {
    d.path.emplace_back(kv.key());
    T x{};
    bool ok = read(d, kv.value(), x);
    d.path.pop_back();
    if (!ok) return false;
    out.emplace(std::string(kv.key()), std::move(x));
  }
  return true;
}

// The members of one JSON object, read by key.
class Fields {
 public:
  Fields(Decoder& d, const json::object& o) : d_(d), o_(o) {}

  // Reads `key` into `out` when present and not null; absent leaves `out` unchanged.
  template <class T>
  bool opt(std::string_view key, T& out) {
    auto it = o_.find(key);
    if (it == o_.end() || it->value().is_null()) return true;
    d_.path.emplace_back(key);
    bool ok = read(d_, it->value(), out);
    d_.path.pop_back();
    return ok;
  }

  // Like opt, but absent or null is an error.
  template <class T>
  bool req(std::string_view key, T& out) {
    auto it = o_.find(key);
    if (it == o_.end() || it->value().is_null()) {
      d_.path.emplace_back(key);
      d_.fail("is required");
      d_.path.pop_back();
      return false;
    }
    return opt(key, out);
  }

 private:
  Decoder& d_;
  const json::object& o_;
};

// Runs `body(fields)` when `v` is an object.
template <class F>
bool read_object(Decoder& d, const json::value& v, F&& body) {
  if (!v.is_object()) return d.fail("expected an object");
  Fields f(d, v.get_object());
  return body(f);
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

json::value to_value(const std::string& s) { return json::value(s); }
json::value to_value(bool b) { return json::value(b); }
json::value to_value(int i) { return json::value(i); }
json::value to_value(std::int64_t i) { return json::value(i); }
json::value to_value(std::uint64_t i) { return json::value(i); }
json::value to_value(double x) {
  // Whole numbers are written as integers ("30", not "3E1"); readers accept either. Every whole double an integer
  // type holds is, because Boost.JSON 1.81 reads integers exactly but not every "2.5595255555520458E17" (its
  // double parsing is not correctly rounded), and a peer must read back the value that was sent.
  if (std::trunc(x) == x && std::fabs(x) < 0x1p63) return json::value(static_cast<std::int64_t>(x));
  if (std::trunc(x) == x && x >= 0 && x < 0x1p64) return json::value(static_cast<std::uint64_t>(x));
  return json::value(x);
}
json::value to_value(const json::object& o) { return json::value(o); }
json::value to_value(const json::value& v) { return v; }
template <class E>
  requires std::is_enum_v<E>
json::value to_value(E e) {
  return json::value(to_string(e));
}
template <fields::HasFields T>
json::value to_value(const T& x);
template <class T>
json::value to_value(const std::vector<T>& xs) {
  json::array a;
  a.reserve(xs.size());
  for (const auto& x : xs) a.push_back(to_value(x));
  return a;
}
template <class T>
json::value to_value(const std::map<std::string, T>& m) {
  json::object o;
  o.reserve(m.size());
  for (const auto& [k, x] : m) o.emplace(k, to_value(x));
  return o;
}
template <class T>
json::value to_value(const std::optional<T>& x) {
  return x ? to_value(*x) : json::value(nullptr);
}

// ---------------------------------------------------------------------------------------------------------
// The field tables (protocol/fields.hpp), read and written generically

template <fields::HasFields S>
bool read(Decoder& d, const json::value& v, S& x);

template <class S>
bool read_entries(Fields& f, S& x);

template <class S, class M>
bool read_entry(Fields& f, S& x, const fields::Field<S, M>& e) {
  return e.need == fields::Need::required ? f.req(e.key, x.*e.member) : f.opt(e.key, x.*e.member);
}

template <class S, class Sub>
bool read_entry(Fields& f, S& x, const fields::Flat<S, Sub>& e) {
  return read_entries(f, x.*e.member);
}

template <class S>
bool read_entries(Fields& f, S& x) {
  return std::apply([&](const auto&... e) { return (read_entry(f, x, e) && ...); }, fields::Wire<S>::fields);
}

template <fields::HasFields S>
bool read(Decoder& d, const json::value& v, S& x) {
  return read_object(d, v, [&](Fields& f) { return read_entries(f, x); });
}

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class S>
void write_entries(json::object& o, const S& x);

template <class S, class M>
void write_entry(json::object& o, const S& x, const fields::Field<S, M>& e) {
  const M& m = x.*e.member;
  if constexpr (IsOptional<M>::value) {
    if (!m && e.emit != fields::Emit::null_when_absent) return;
  } else if constexpr (requires { m.empty(); }) {
    if (m.empty() && e.emit == fields::Emit::unless_empty) return;
  }
  o[e.key] = to_value(m);
}

template <class S, class Sub>
void write_entry(json::object& o, const S& x, const fields::Flat<S, Sub>& e) {
  write_entries(o, x.*e.member);
}

template <class S>
void write_entries(json::object& o, const S& x) {
  std::apply([&](const auto&... e) { (write_entry(o, x, e), ...); }, fields::Wire<S>::fields);
}

template <fields::HasFields T>
json::value to_value(const T& x) {
  json::value jv;
  write_entries(jv.emplace_object(), x);
  return jv;
}

// Limits walk after parsing (Boost.JSON enforces depth itself).
bool within_limits(const json::value& v, const Limits& limits, std::string& why) {
  switch (v.kind()) {
    case json::kind::string:
      if (v.get_string().size() > limits.max_string) {
        why = "a string exceeds " + std::to_string(limits.max_string) + " bytes";
        return false;
      }
      return true;
    case json::kind::array:
      if (v.get_array().size() > limits.max_array) {
        why = "an array exceeds " + std::to_string(limits.max_array) + " elements";
        return false;
      }
      for (const auto& e : v.get_array())
        if (!within_limits(e, limits, why)) return false;
      return true;
    case json::kind::object:
      if (v.get_object().size() > limits.max_array) {
        why = "an object exceeds " + std::to_string(limits.max_array) + " members";
        return false;
      }
      for (const auto& kv : v.get_object()) {
        if (kv.key().size() > limits.max_string) {
          why = "a key exceeds " + std::to_string(limits.max_string) + " bytes";
          return false;
        }
        if (!within_limits(kv.value(), limits, why)) return false;
      }
      return true;
    default:
      return true;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// value_from / from_json / try_value_to, for every struct with a table

template <class T>
Result<T> from_json(const json::value& v) {
  Decoder d;
  T x{};
  if (!read(d, v, x)) return fail(d.error);
  return x;
}

Result<json::value> parse_json(std::string_view text, const Limits& limits) {
  json::parse_options opts;
  opts.max_depth = static_cast<std::size_t>(limits.max_depth);
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, opts);
  if (ec) {
    if (ec == json::error::too_deep)
      return fail("invalid JSON: nested deeper than " + std::to_string(limits.max_depth) + " levels");
    return fail("invalid JSON: " + ec.message());
  }
  std::string why;
  if (!within_limits(v, limits, why)) return fail("invalid JSON: " + why);
  return v;
}

template <class T>
Result<T> parse_as(std::string_view text, const Limits& limits) {
  auto v = parse_json(text, limits);
  if (!v) return v.error();
  return from_json<T>(*v);
}

#define NYMPH_PROTOCOL_DECODE(T)                                                                      \
  void tag_invoke(json::value_from_tag, json::value& jv, const T& x) { jv = to_value(x); }            \
  template Result<T> from_json<T>(const json::value&);                                                \
  template Result<T> parse_as<T>(std::string_view, const Limits&);                                    \
  boost::system::result<T> tag_invoke(json::try_value_to_tag<T>, const json::value& jv) {             \
    Decoder d;                                                                                        \
    T x{};                                                                                            \
    if (!read(d, jv, x)) return boost::system::error_code(json::error::not_exact);                    \
    return x;                                                                                         \
  }
NYMPH_PROTOCOL_DECODE(ErrorBody)
NYMPH_PROTOCOL_DECODE(AttemptRef)
NYMPH_PROTOCOL_DECODE(SlurmAllocation)
NYMPH_PROTOCOL_DECODE(Payload)
NYMPH_PROTOCOL_DECODE(JobSpec)
NYMPH_PROTOCOL_DECODE(RegisterRequest)
NYMPH_PROTOCOL_DECODE(CancelOrder)
NYMPH_PROTOCOL_DECODE(RegisterResponse)
NYMPH_PROTOCOL_DECODE(PollRequest)
NYMPH_PROTOCOL_DECODE(JobAssignment)
NYMPH_PROTOCOL_DECODE(PollResponse)
NYMPH_PROTOCOL_DECODE(EventRequest)
NYMPH_PROTOCOL_DECODE(EventResponse)
NYMPH_PROTOCOL_DECODE(LogAppendResponse)
NYMPH_PROTOCOL_DECODE(ExitRequest)
NYMPH_PROTOCOL_DECODE(JobSubmission)
NYMPH_PROTOCOL_DECODE(EventInfo)
NYMPH_PROTOCOL_DECODE(AttemptInfo)
NYMPH_PROTOCOL_DECODE(JobInfo)
NYMPH_PROTOCOL_DECODE(JobList)
NYMPH_PROTOCOL_DECODE(WorkerInfo)
NYMPH_PROTOCOL_DECODE(WorkerList)
NYMPH_PROTOCOL_DECODE(TokenInfo)
NYMPH_PROTOCOL_DECODE(TokenList)
NYMPH_PROTOCOL_DECODE(RevokeRequest)
NYMPH_PROTOCOL_DECODE(RevokeResponse)
NYMPH_PROTOCOL_DECODE(PurgeRequest)
NYMPH_PROTOCOL_DECODE(PurgeResponse)
#undef NYMPH_PROTOCOL_DECODE

std::string error_document(const ErrorBody& e) {
  json::object doc;
  doc["error"] = json::value_from(e);
  return json::serialize(doc);
}

std::optional<ErrorBody> parse_error_document(std::string_view body) {
  auto v = parse_json(body);
  if (!v || !v->is_object()) return std::nullopt;
  auto it = v->get_object().find("error");
  if (it == v->get_object().end()) return std::nullopt;
  auto e = from_json<ErrorBody>(it->value());
  if (!e) return std::nullopt;
  return *e;
}

}  // namespace nymph::protocol
