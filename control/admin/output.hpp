#pragma once
// How the admin commands print: tables for people, JSON for machines, raw bytes for logs, errors on stderr.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

namespace nymph::control::admin {

// Prints "nymph-control: error: <message>" on stderr; returns 1, the exit status of a failed command.
int report(const std::string& message);

// Prints `rows` (the first one the header) as left-aligned columns two spaces apart on stdout.
void print_table(const std::vector<std::vector<std::string>>& rows);

// Prints `v` as one line of JSON on stdout.
void print_json(const boost::json::value& v);

// Writes `bytes` to `f` and flushes it; false when not everything was written.
bool write_all(std::FILE* f, const std::string& bytes);

// The number, or "-" when there is none (table cells).
std::string opt_int(std::optional<int> x);

}  // namespace nymph::control::admin
