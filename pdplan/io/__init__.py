"""Every file pdplan reads: YAML specs, the catalogue, HF ``config.json``, workload presets and traces, kernel
tables, serving defaults, the data the roofline takes as parameters (:mod:`pdplan.io.perf_data`), scenarios, and
``pdplan validate``'s table of file kinds. Below :mod:`pdplan.io` nothing touches the file system."""
