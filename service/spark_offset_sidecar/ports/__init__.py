"""The ports: what the runtime and the HTTP layer need from Kafka (``kafka``) and from the
database (``store``, ``leases``, ``database``) and from an identity provider (``identity``), as
protocols and plain data.

No third-party import. The real adapters are in ``spark_offset_sidecar.adapters``; the
in-memory doubles in ``spark_offset_sidecar.testing``. May import: the core, ``errors``.
"""
