"""The adapters: the ports implemented against what they talk to, one subpackage each
(``kafka``: aiokafka; ``sql``: SQLAlchemy, psycopg, Alembic; ``checkpoints``: fsspec
and its S3 implementation). Foreign errors become the
service's own (``spark_offset_sidecar.errors``) here and nowhere else.

May import: the core, the ports, ``errors``, ``settings``; never the runtime or HTTP.
"""
