#pragma once
// JSON conversions of the /v1 wire types (protocol/types.hpp), through Boost.JSON:
//   boost::json::value_from(x)                 -> camelCase JSON object
//   boost::json::try_value_to<T>(v)            -> boost::system::result<T> (error_code only)
//   nymph::protocol::from_json<T>(v)           -> nymph::Result<T> whose message names the bad field
//                                                 ("field 'spec.argv[2]': expected a string")
// Each struct's fields are listed once, in one table used for both directions (protocol/json.cpp).
// Decoding ignores unknown keys (forward compatibility: additive changes never break an older peer), treats
// a JSON null like an absent key, and rejects wrong types and out-of-range values. Absent optional members
// are omitted when encoding (except the few the protocol sends as an explicit null).
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/conversion.hpp>
#include <boost/json/fwd.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <boost/system/result.hpp>

#include "common/error.hpp"
#include "protocol/types.hpp"

namespace nymph::protocol {

// Decodes `v` into T, or returns an Error naming the offending field. Never throws.
template <class T>
Result<T> from_json(const boost::json::value& v);

// Parses `text` as JSON under `limits` (depth, string and array sizes, no comments or trailing commas) and
// decodes it into T. The Error says what was wrong ("invalid JSON at byte 17", "field 'seq': ...").
template <class T>
Result<T> parse_as(std::string_view text, const Limits& limits = kLimits);

// Parses `text` as a JSON value under `limits`. Never throws.
Result<boost::json::value> parse_json(std::string_view text, const Limits& limits = kLimits);

// Serialises any wire struct to compact JSON text.
template <class T>
std::string to_json_text(const T& x) {
  return boost::json::serialize(boost::json::value_from(x));
}

#define NYMPH_PROTOCOL_JSON(T)                                                                        \
  void tag_invoke(boost::json::value_from_tag, boost::json::value& jv, const T& x);                   \
  boost::system::result<T> tag_invoke(boost::json::try_value_to_tag<T>, const boost::json::value& jv);
NYMPH_PROTOCOL_JSON(ErrorBody)
NYMPH_PROTOCOL_JSON(AttemptRef)
NYMPH_PROTOCOL_JSON(SlurmAllocation)
NYMPH_PROTOCOL_JSON(Payload)
NYMPH_PROTOCOL_JSON(JobSpec)
NYMPH_PROTOCOL_JSON(RegisterRequest)
NYMPH_PROTOCOL_JSON(CancelOrder)
NYMPH_PROTOCOL_JSON(RegisterResponse)
NYMPH_PROTOCOL_JSON(PollRequest)
NYMPH_PROTOCOL_JSON(JobAssignment)
NYMPH_PROTOCOL_JSON(PollResponse)
NYMPH_PROTOCOL_JSON(EventRequest)
NYMPH_PROTOCOL_JSON(EventResponse)
NYMPH_PROTOCOL_JSON(LogAppendResponse)
NYMPH_PROTOCOL_JSON(ExitRequest)
NYMPH_PROTOCOL_JSON(JobSubmission)
NYMPH_PROTOCOL_JSON(EventInfo)
NYMPH_PROTOCOL_JSON(AttemptInfo)
NYMPH_PROTOCOL_JSON(JobInfo)
NYMPH_PROTOCOL_JSON(JobList)
NYMPH_PROTOCOL_JSON(WorkerInfo)
NYMPH_PROTOCOL_JSON(WorkerList)
NYMPH_PROTOCOL_JSON(TokenInfo)
NYMPH_PROTOCOL_JSON(TokenList)
NYMPH_PROTOCOL_JSON(RevokeRequest)
NYMPH_PROTOCOL_JSON(RevokeResponse)
NYMPH_PROTOCOL_JSON(PurgeRequest)
NYMPH_PROTOCOL_JSON(PurgeResponse)
#undef NYMPH_PROTOCOL_JSON

// Wraps an ErrorBody as the full error document {"error":{...}} and back.
std::string error_document(const ErrorBody& e);
// Reads {"error":{...}} from a reply body; nullopt when the body is not such a document.
std::optional<ErrorBody> parse_error_document(std::string_view body);

}  // namespace nymph::protocol
