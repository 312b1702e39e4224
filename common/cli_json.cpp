#include "common/cli_json.hpp"

#include <iostream>

#include <boost/json/serialize.hpp>

namespace nymph::cli {

namespace json = boost::json;

json::object error_json(std::string_view code, std::string_view message, json::object details) {
  json::object e = std::move(details);
  e["code"] = code;
  e["message"] = message;
  return json::object{{"error", std::move(e)}};
}

int report_failure(std::string_view verb, std::string_view code, std::string_view message, bool json,
                   int exit_code, json::object details) {
  std::cerr << "nymph" << (verb.empty() ? "" : " ") << verb << ": " << message << (message.ends_with('\n') ? "" : "\n");
  if (json) std::cout << json::serialize(error_json(code, message, std::move(details))) << "\n" << std::flush;
  return exit_code;
}

bool wants_json(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

}  // namespace nymph::cli
