#include "control/admin/output.hpp"

#include <algorithm>
#include <iostream>

#include <boost/json/serialize.hpp>

namespace nymph::control::admin {

int report(const std::string& message) {
  std::cerr << "nymph-control: error: " << message << "\n";
  return 1;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

void print_json(const boost::json::value& v) { std::cout << boost::json::serialize(v) << "\n"; }

bool write_all(std::FILE* f, const std::string& bytes) {
  if (bytes.empty()) return true;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  std::fflush(f);
  return ok;
}

std::string opt_int(std::optional<int> x) { return x ? std::to_string(*x) : "-"; }

}  // namespace nymph::control::admin
