#pragma once
// The project's value type for expected failures that a person must be able to read.
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

namespace nymph {

// An expected failure with a message meant for a person (it names the bad key, value, file or peer).
// Made with fail("..."). It is deliberately not constructible from a bare string, so that Result<std::string>
// can tell a value from an error.
struct Error {
  struct FromMessage {};
  Error() = default;
  Error(FromMessage, std::string text) : message(std::move(text)) {}
  std::string message;
};

// Result of an operation that can fail in an expected way.
template <class T>
using Result = boost::system::result<T, Error>;

// Makes an Error from a message, for `return fail("...")`.
inline Error fail(std::string message) { return Error(Error::FromMessage{}, std::move(message)); }

// Called by Result<T>::value() when it holds an Error: throws std::runtime_error with the message.
[[noreturn]] inline void throw_exception_from_error(const Error& e, const boost::source_location&) {
  throw std::runtime_error(e.message);
}

}  // namespace nymph
