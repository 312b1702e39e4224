#pragma once
// Counts allocations through the global operator new: the test binary that links allocation_counter.cpp
// replaces it (the allocation itself is still malloc's, so sanitizers see every block).
#include <cstddef>

namespace nymph::test {

// Calls of the global operator new (single object or array, throwing or not) made by the calling thread so far.
std::size_t allocations_on_this_thread();

}  // namespace nymph::test
