"""The composition roots: the places that know every part and build a process from them.
Nothing else imports them but the command line and the child programs (``child``).

  - ``root``: the process taking events (``create_app(settings, parts)``; ``serve``
    runs it): the FastAPI application, its routes and its lifespan;
  - ``start``: its lifespan's steps, in order, each part registering how it stops as it
    starts (a failure while starting stops what had started; shutdown runs in reverse);
  - ``watch``: the watcher, the service's child (``topology``; ``create_watch_app``, on
    the database ``open_database`` opens), and
    ``watcher_brief``: what the service hands it (its settings, its topology);
  - ``parts``: what the service is built from besides the settings, each part complete
    (``production``: aiokafka's clients on the SQL database, ``database``; tests hand in
    the doubles of ``testing``), and how its watcher is made (a child process);
  - ``shared``: what the service and its watcher build alike; ``watching``: the lag
    monitors and the background tasks both start;
  - ``kafka_clients``: each Kafka cluster's client options and the readers both build on
    them; ``kafka_commits``: the clients the service alone builds (its committers).

This ``__init__`` imports none of them: a process imports the root it runs, and the
watcher's import graph holds nothing of the side taking events (``docs/decisions.md``,
"Each process imports what it runs").
"""
