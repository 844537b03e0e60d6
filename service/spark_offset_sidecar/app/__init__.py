"""The composition root: the one place that knows every part and builds the service from
them (``create_app(settings, parts)``; ``serve`` runs it). Nothing else imports it but the
command line.

  - ``parts``: what the service is built from besides the settings (doubles handed in by
    tests; whether the watcher and the writer run as child processes);
  - ``root``: the FastAPI application, its routes and its lifespan;
  - ``start``: the lifespan's steps, in order, each part registering how it stops as it
    starts (a failure while starting stops what had started; shutdown runs in reverse);
  - ``watch``: the watcher, the service's child (``topology``);
  - ``shared``: what the service and its watcher build alike;
  - ``kafka_clients``: each Kafka cluster's client options and the clients built on them.
"""

from spark_offset_sidecar.app.parts import Parts
from spark_offset_sidecar.app.root import create_app

__all__ = ["Parts", "create_app"]
