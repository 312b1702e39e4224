// Replaced by the control-plane implementation.
