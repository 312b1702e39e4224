// The replacement global operator new and delete behind allocations_on_this_thread().
#include "allocation_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::size_t allocations = 0;  // constant-initialised: no allocation of its own
}  // namespace

std::size_t nymph::test::allocations_on_this_thread() { return allocations; }

// The array and nothrow forms of libstdc++ call this one; the aligned forms keep their own (aligned_alloc/free).
void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
