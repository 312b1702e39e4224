// A library the tests preload (LD_PRELOAD) into a server to make operator new fail, as it does when memory
// runs out, for any single allocation above NYMPH_TEST_ALLOC_LIMIT bytes (unset or 0: no limit). The server
// then meets a real std::bad_alloc wherever it allocates large, with no hook in its own code. Replaces every
// unaligned operator new and delete (malloc/free underneath, so ASan still sees matching pairs); the aligned
// ones stay the runtime's.
#include <cstdlib>
#include <new>

namespace {

std::size_t limit() {
  static const std::size_t bytes = [] {
    const char* v = std::getenv("NYMPH_TEST_ALLOC_LIMIT");
    return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : 0;
  }();
  return bytes;
}

void* allocate(std::size_t n) noexcept {
  if (limit() != 0 && n > limit()) return nullptr;
  return std::malloc(n == 0 ? 1 : n);
}

void* allocate_or_throw(std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
