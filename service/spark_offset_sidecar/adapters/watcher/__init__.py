"""The watcher process the service starts as its child (``topology``)."""
