"""The HTTP layer: routes, their bodies, tokens and grants, the one exception -> answer
table (docs/development.md has the map). Never imports an adapter: what it needs of Kafka
is a port in ``state.Runtime``.
"""
