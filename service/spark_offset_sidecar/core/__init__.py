"""The pure core: the rules, and everything they decide on. Standard library only, no
I/O, no clock of its own (``tests/unit/test_layers.py`` keeps it so).

Shared by every part: Kafka positions (``offsets``), the names the service accepts
(``names``, ``patterns``) and which Kafka cluster a group commits to (``clusters``).

The parts:
  - ``ledger``: Flink's commit-on-checkpoint rules (``rules``, its transition table), the
    state they keep (``state``), the changes they decide (``changes``), how a replica takes
    in a group as the shared database holds it (``merge``) and the lease rules (``leases``).
  - ``spark``: what Spark writes, read into checkpoints: a progress event (``progress``)
    and a checkpoint folder's files (``checkpoint_log``).
  - ``lag``: a group's status (``status``, Burrow's evaluator), lag in time and data at
    risk (``figures``, over ``log_history`` and ``packed_rows``), the report readers see
    (``report``) and what only the process taking events knows (``group_memory``).
"""
