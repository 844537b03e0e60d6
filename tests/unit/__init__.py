"""What runs without I/O: the core's rules (against Flink's reference too), leases, status,
parsing, errors, settings, logs, tokens, and the layout's own rules."""
