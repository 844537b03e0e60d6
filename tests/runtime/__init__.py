"""The durable ledger and the loops, with the in-memory doubles of the ports and with real
stores."""
