"""What operators read: Prometheus metrics on an injected registry, read at scrape time
(``metrics``), and one JSON object per log line (``logs``)."""
