#pragma once
// The files of one attempt's job directory in launch_dir, read and written with plain blocking calls. launch_dir
// is on a shared filesystem: the runner calls these on its I/O threads (runners/slurm/io_pool.hpp), never on
// the io_context thread.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/error.hpp"

namespace nymph::runners::slurm {

// At most `max` bytes of the file at `path` from byte `offset` on: empty at its current end, before it exists,
// or when it cannot be read. The file is opened for each call and closed again: a thousand tracked jobs must
// not hold two thousand descriptors.
std::string read_chunk(const std::filesystem::path& path, std::uint64_t offset, std::size_t max);

// The number in an exit-status file (what the script's EXIT trap writes), or nullopt when there is none.
std::optional<int> read_status_file(const std::filesystem::path& path);

// Writes `text` to `path` (created or truncated), then sets `perms`. Error names the path.
Result<void> write_file(const std::filesystem::path& path, const std::string& text, std::filesystem::perms perms);

// Removes whatever is at `dir` and creates it afresh, mode 0700. Error names the directory.
Result<void> make_fresh_dir(const std::filesystem::path& dir);

}  // namespace nymph::runners::slurm
