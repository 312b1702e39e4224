#pragma once
// Reading the JSON that the CLIs print, in tests.
#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/commands.hpp"

namespace nymph::test {

// The one JSON object a command printed on stdout; records a test failure (and returns {}) otherwise.
inline boost::json::object one_object(const CommandOutput& r) {
  boost::system::error_code ec;
  auto v = boost::json::parse(r.out, ec);
  EXPECT_FALSE(ec) << "stdout is not one JSON value: " << r.out << r.err;
  return v.is_object() ? v.as_object() : boost::json::object{};
}

// The string member `key` of `o`, or "null" when it is absent or null.
inline std::string str(const boost::json::object& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return "null";
  return std::string(it->value().as_string());
}

}  // namespace nymph::test
