"""spark-offset-sidecar: commits Spark Structured Streaming's Kafka offsets to a consumer
group on every completed checkpoint, the way Flink does.

The layers, each allowed to import only what is to its left (``tests/unit/test_layers.py``):

    core -> ports -> adapters (kafka, sql)
                  -> runtime (loops; ports only) -> http (routes; no adapter) -> app

- ``core``      the ledger's rules, pure: standard library only, no I/O
- ``ports``     protocols towards Kafka and the database, no third-party import
- ``adapters``  the ports implemented: ``kafka`` (aiokafka), ``sql`` (SQLAlchemy)
- ``runtime``   the durable ledger and the loops (commit, lag, leases)
- ``http``      routes, bodies, tokens, the one exception -> answer table
- ``observe``   metrics and logs
- ``errors``    the whole error tree; ``settings`` read once from the environment
- ``app``       the composition roots (the service's, its watcher's): the only modules
                that wire adapters into loops and routes; only ``cli`` and ``child``
                import them, each process its own
- ``testing``   in-memory doubles of the ports, for tests (production never imports it)
"""

# The release this is (releases.toml; python scripts/release.py stamp writes it here).
__version__ = "0.3.0"
