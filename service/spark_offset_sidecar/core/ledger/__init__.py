"""The ledger: Flink's commit-on-checkpoint rules for Spark queries, the state they keep
and the changes they decide."""
