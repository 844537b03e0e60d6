"""The composition root: the one place that knows every part and builds the service from
them (``create_app``; ``serve`` runs it). Nothing else imports it but the command line.

  - ``root``: the FastAPI application, its routes and its lifespan;
  - ``start``: the lifespan's steps, in order, each part registering how it stops as it
    starts (a failure while starting stops what had started; shutdown runs in reverse);
  - ``kafka_clients``: each Kafka cluster's client options and the clients built on them.
"""

from spark_offset_sidecar.app.root import create_app

__all__ = ["create_app"]
