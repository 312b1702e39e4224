#pragma once
// Fresh ULIDs for tests (launch ids and the like). Production code passes a UlidGenerator as a value instead.
#include <stdexcept>
#include <string>

#include "common/ulid.hpp"

namespace nymph::test {

inline std::string fresh_ulid() {
  static UlidGenerator ids;
  auto id = ids.next();
  if (!id) throw std::runtime_error(id.error().message);
  return id->str();
}

}  // namespace nymph::test
