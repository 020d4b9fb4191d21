"""Every file pdplan reads: YAML specs, the catalogue, HF ``config.json``, workload presets and traces, kernel
tables, serving defaults, scenarios, and ``pdplan validate``'s table of file kinds. Below :mod:`pdplan.io` nothing
touches the file system."""
