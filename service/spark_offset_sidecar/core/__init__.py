"""The pure core: the rules, and everything they decide on. Standard library only, no
I/O, no clock of its own (``tests/unit/test_layers.py`` keeps it so): ``ledger`` (the
commit rules), ``spark`` (what Spark writes, read), ``lag`` (statuses and lag figures).
"""
