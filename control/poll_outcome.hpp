#pragma once
// What the store's poll operation decides for one poll (Store::poll), shared by the store and the poll hub
// (control/poll_hub.hpp), which hands an outcome computed by another operation to a parked poll.
#include <string>
#include <vector>

#include "control/policy.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control {

// A lease and the runner of its attempt (whose lease TTL applies).
struct LeaseRef {
  std::string lease_id;
  std::string runner;
  friend bool operator==(const LeaseRef&, const LeaseRef&) = default;
};

// The answer to one poll: its reply (jobs leased, cancel orders, directive) and what the clocks must know.
struct PollOutcome {
  protocol::PollResponse reply;
  std::vector<LeaseRef> renewed_leases;      // listed attempts that are live
  WorkerCaps caps;
  bool draining = false;                     // draining flag or a directive: takes no jobs
};

}  // namespace nymph::control
