#include "runners/slurm/io_pool.hpp"

#include <algorithm>

namespace nymph::runners::slurm {

IoPool::IoPool(int threads)
    : pool_(static_cast<std::size_t>(std::max(threads, 1))), ordered_(boost::asio::make_strand(pool_.get_executor())) {}

IoPool::~IoPool() { join(); }

void IoPool::join() { pool_.join(); }

}  // namespace nymph::runners::slurm
