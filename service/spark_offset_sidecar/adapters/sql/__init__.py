"""The database, through SQLAlchemy: the schema (``schema``) and its Alembic migrations
(``migrate``; the scripts are ``spark_offset_sidecar.migrations``), the ledger's store
(``store``, ``writes``), the store shared by replicas (``shared_store``) with its change
notices, and their leases (``lease_store``). PostgreSQL-only modules import psycopg
lazily: a plain install serves on SQLite.
"""
