#pragma once
// Logger construction. Library code receives a logger as a value (std::shared_ptr<spdlog::logger>);
// nothing in nymph logs through spdlog's default logger.
#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace nymph {

// Creates a logger called `name` writing to stderr, or appending to `file` when it is non-empty.
// `level` is one of trace, debug, info, warn, error, critical, off. Throws std::runtime_error when the
// level is unknown or the file cannot be opened (a start-up error).
std::shared_ptr<spdlog::logger> make_logger(const std::string& name, const std::string& level,
                                            const std::string& file = {});

// A logger that discards everything, for tests and library defaults.
std::shared_ptr<spdlog::logger> null_logger();

}  // namespace nymph
