"""The adapters against the real thing: a real Kafka broker, SQLite and a real PostgreSQL."""
