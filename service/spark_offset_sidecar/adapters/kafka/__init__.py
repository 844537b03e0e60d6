"""Kafka, through aiokafka (below its public API only in ``wire``)."""
