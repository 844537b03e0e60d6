"""Real processes end to end: the service, Kafka, PostgreSQL, PySpark, the CLI, the wheel
and the Helm chart."""
