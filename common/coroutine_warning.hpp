#pragma once
// A narrow switch for one compiler false positive, used around the few coroutines that trigger it.
//
// GCC 12 (and later, bug still open) reports -Wmismatched-new-delete at the closing brace of some Asio
// coroutines once Asio's recycling frame allocator is inlined: awaitable_frame_base's operator new and its sized
// operator delete are a matching pair, but the middle end sees aligned_alloc on one side and the sized class
// delete on the other (GCC PR middle-end/109224). Only optimised builds (release, static) see it.
//
// Wrap exactly the coroutine definition the compiler names - never a whole file - so the warning stays on for
// everything else:
//   NYMPH_GCC_PR109224_BEGIN
//   asio::awaitable<void> f() { ... }
//   NYMPH_GCC_PR109224_END
#if defined(__GNUC__) && !defined(__clang__)
#define NYMPH_GCC_PR109224_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmismatched-new-delete\"")
#define NYMPH_GCC_PR109224_END _Pragma("GCC diagnostic pop")
#else
#define NYMPH_GCC_PR109224_BEGIN
#define NYMPH_GCC_PR109224_END
#endif
