// Replaced by the installer implementation.
