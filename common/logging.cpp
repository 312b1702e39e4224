#include "common/logging.hpp"

#include <stdexcept>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace nymph {

std::shared_ptr<spdlog::logger> make_logger(const std::string& name, const std::string& level,
                                            const std::string& file) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw std::runtime_error("unknown log level '" + level + "' (trace, debug, info, warn, error, critical, off)");
  spdlog::sink_ptr sink;
  if (file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, /*truncate=*/false);
  }
  auto logger = std::make_shared<spdlog::logger>(name, std::move(sink));
  logger->set_level(lvl);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ [%n] %v");
  logger->flush_on(spdlog::level::info);
  return logger;
}

std::shared_ptr<spdlog::logger> null_logger() {
  return std::make_shared<spdlog::logger>("null", std::make_shared<spdlog::sinks::null_sink_mt>());
}

}  // namespace nymph
