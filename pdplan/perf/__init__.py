"""Phase performance model: per-operator roofline on a calibrated kernel cost table (pure numpy)."""
