"""The adapters: the ports implemented against what they talk to. Foreign errors become
the service's own (``errors``) here and nowhere else. May import: the core, the ports,
``errors``, ``settings``; never the runtime or HTTP."""
