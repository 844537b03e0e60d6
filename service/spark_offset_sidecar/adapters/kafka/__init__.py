"""Kafka, through aiokafka: commits (``committer``), log ends (``log_ends``), reads of a
group's coordinator and committed offsets (``admin``), and what is built on those reads
(``starting_offsets``, ``group_report``); client options from the settings (``options``).
"""
