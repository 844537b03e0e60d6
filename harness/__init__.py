"""The real components that the tests and the benchmarks start and stop: a Kafka broker
(KRaft, jars from Maven Central), a PostgreSQL server, the service as a process, a cluster
of replicas. Not part of any distribution."""
