"""The watcher process this one starts (``SIDECAR_WATCHER=child``)."""
