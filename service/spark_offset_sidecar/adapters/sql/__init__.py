"""The database, through SQLAlchemy and Alembic. PostgreSQL-only modules import psycopg
lazily: a plain install serves on SQLite."""
