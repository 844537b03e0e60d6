"""The HTTP layer: routes (``event_routes``, ``status_routes``), their bodies
(``models``), tokens and grants (``auth``, ``access``), the body limit (``body_limit``),
the one exception -> answer table and error body (``refusals``) and what routes reach of
the running service (``state``).

May import the core, the ports, the runtime and ``observe``; never an adapter: what it
needs of Kafka is a port in ``state.Runtime``.
"""
