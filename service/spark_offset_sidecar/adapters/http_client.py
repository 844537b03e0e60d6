"""The service's requests to other HTTP servers (an OAuth token endpoint, a JWKS issuer;
the command line's to the service), all through httpx and this one function.

    status, body = fetch("GET", url, timeout=10, limit=1 << 20)

- Synchronous: its callers are the command line, or run it in a worker thread.
- It trusts the CAs Python's ``ssl`` trusts (the machine's, ``SSL_CERT_FILE``), or
  ``ca_file``'s alone, not certifi's; proxies come from the environment.
- A GET follows redirects, another method does not (as ``urllib`` did before it).
- At most ``limit`` bytes of the body are read; every status is returned, and a server
  that cannot be reached or answers too slowly raises ``httpx.HTTPError``.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

import httpx


def fetch(
    method: str,
    url: str,
    *,
    timeout: float,
    limit: int,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    form: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    ca_file: str | Path | None = None,
) -> tuple[int, bytes]:
    """The answer's status and at most ``limit`` bytes of its body."""
    context = ssl.create_default_context(cafile=ca_file)
    with (
        httpx.Client(verify=context, timeout=timeout, follow_redirects=method == "GET") as client,
        client.stream(
            method, url, headers=headers, content=content, data=form, auth=auth
        ) as answer,
    ):
        body = bytearray()
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) >= limit:
                break
        return answer.status_code, bytes(body[:limit])
