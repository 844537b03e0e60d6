"""The Spark side of spark-offset-sidecar: a StreamingQueryListener
(``spark_offset_listener.listener.OffsetCommitListener``) that posts every completed batch
to the sidecar through a background sender (``spark_offset_listener.sender``).

Its own distribution, ``spark-offset-listener``: the standard library only (the driver
brings pyspark), nothing of the service's dependencies."""

# The release this is (releases.toml; python scripts/release.py stamp writes it here).
__version__ = "0.3.0"
