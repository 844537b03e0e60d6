"""The watcher process this one starts: its child (docs/run/processes.md)."""
