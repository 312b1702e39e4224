#pragma once
// Expected failures of control-plane operations, carrying the HTTP status and protocol error code
// (docs/protocol.md section 3).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

namespace nymph::control {

struct ApiError {
  unsigned status = 400;
  std::string code;
  std::string message;
  std::optional<std::uint64_t> expected_offset;  // logGap only
  std::optional<std::int64_t> last_seq;          // outOfOrder only
};

// Result of an operation that may fail with a protocol error.
template <class T>
using ApiResult = boost::system::result<T, ApiError>;

// Called by ApiResult<T>::value() on an error: throws std::runtime_error with the message.
[[noreturn]] inline void throw_exception_from_error(const ApiError& e, const boost::source_location&) {
  throw std::runtime_error(e.code + ": " + e.message);
}

inline ApiError bad_request(std::string m) { return {400, "badRequest", std::move(m), {}}; }
inline ApiError invalid_json(std::string m) { return {400, "invalidJson", std::move(m), {}}; }
inline ApiError invalid_field(std::string m) { return {400, "invalidField", std::move(m), {}}; }
inline ApiError unknown_worker(const std::string& id) {
  return {404, "unknownWorker", "no worker '" + id + "' (unknown or gone; re-register with the same launchId)", {}};
}
inline ApiError unknown_job(const std::string& id) { return {404, "unknownJob", "no job '" + id + "'", {}}; }
inline ApiError lease_lost(std::string m) { return {409, "leaseLost", std::move(m), {}}; }
inline ApiError conflict(std::string code, std::string m) { return {409, std::move(code), std::move(m), {}}; }
inline ApiError forbidden(std::string m) { return {403, "forbidden", std::move(m), {}}; }
inline ApiError unavailable(std::string m) { return {503, "unavailable", std::move(m), {}}; }

}  // namespace nymph::control
