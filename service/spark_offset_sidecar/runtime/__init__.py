"""The running parts: the durable ledger and the loops that drive it. Ports only, never an
adapter (``tests/unit/test_layers.py``)."""
