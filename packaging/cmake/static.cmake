# NYMPH_STATIC: the portable login-node binary (docs/install.md).
#
# Included by the top-level CMakeLists.txt twice:
#   - before find_package (NYMPH_STATIC_STAGE = deps): ask for the static Boost and OpenSSL archives, and
#     replace the shared fmt / spdlog / toml++ targets by header-only interface targets of the same names
#     (Debian ships no .a for them: FMT_HEADER_ONLY=1, SPDLOG_HEADER_ONLY, TOML_HEADER_ONLY=1);
#   - after the components (NYMPH_STATIC_STAGE = link): link the executables with -static and strip `nymph`.
# The result needs no glibc version and no shared library: `file` says "statically linked" and `objdump -T`
# finds no dynamic symbol table. Boost.Process keeps BOOST_PROCESS_V2_DISABLE_PIDFD_OPEN (project-wide);
# its close_range() call in the forked child returns ENOSYS before Linux 5.9 and is harmless there, because
# platform/spawn.cpp has already closed every inherited descriptor by walking /proc/self/fd.
if(NYMPH_STATIC_STAGE STREQUAL "deps")
  set(Boost_USE_STATIC_LIBS ON)
  set(OPENSSL_USE_STATIC_LIBS TRUE)
  set(CMAKE_FIND_LIBRARY_SUFFIXES .a)  # SQLite3 (nymph-control) and anything else found by find_library

  add_library(fmt::fmt INTERFACE IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY=1")
  add_library(spdlog::spdlog INTERFACE IMPORTED)
  set_target_properties(spdlog::spdlog PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY;SPDLOG_FMT_EXTERNAL"
    INTERFACE_LINK_LIBRARIES "fmt::fmt;Threads::Threads")
  add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1")
elseif(NYMPH_STATIC_STAGE STREQUAL "link")
  if(NYMPH_SANITIZE)
    message(FATAL_ERROR "NYMPH_STATIC and NYMPH_SANITIZE do not go together (the sanitizers need a dynamic runtime)")
  endif()
  target_link_options(nymph PRIVATE -static -s)
  target_link_options(nymph-control PRIVATE -static -s)
  # glibc's "Using 'getaddrinfo' in statically linked applications..." notes describe a trade-off made on
  # purpose (docs/install.md); this launcher drops exactly those lines and keeps every other linker message.
  set_target_properties(nymph nymph-control PROPERTIES
    CXX_LINKER_LAUNCHER ${PROJECT_SOURCE_DIR}/packaging/cmake/static-link-filter.sh)
endif()
