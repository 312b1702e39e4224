// Replaced by the runner implementations.
