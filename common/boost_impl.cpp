// The one translation unit that compiles header-only Boost pieces needing a single definition.
// Boost.Process v2 1.81: process_environment's on_setup is only defined in this .ipp (TOOLCHAIN.md, bug 1).
#include <boost/process/v2/impl/environment.ipp>
