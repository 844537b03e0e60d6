"""A small real OAuth 2 / OIDC issuer for tests: an HTTP server on a loopback port
that signs RS256 JWTs with keys of its own and publishes them.

    issuer = OidcIssuer(clients={"sidecar": "s3cret"}, lifetime=60).start()
    issuer.token_url       # POST: the client-credentials grant (HTTP Basic client auth)
    issuer.jwks_url        # GET: the public keys (JWKS), each with its kid
    issuer.url             # the issuer (iss); /.well-known/openid-configuration names both
    issuer.mint(sub="system:serviceaccount:team-a:etl", aud="spark-offset-sidecar")
    issuer.stop()

What a Kafka broker (``OAuthBearerValidatorCallbackHandler``) and the service check is real:
signatures by ``kid``, ``exp``, ``iat``, ``iss``, ``aud``, ``sub``. ``mint(key=OTHER)``
signs with a key the JWKS does not hold (a forged token); ``refuse`` makes the token
endpoint answer 401 ``invalid_client``; ``down`` makes every route answer 503;
``sign_with`` makes ``/token`` sign with another key; each request is counted by path.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


class SigningKey:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, Any]:
        public: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}


OTHER = SigningKey("not-published")  # signs forged tokens: its kid is not in any JWKS


class OidcIssuer:
    def __init__(
        self,
        clients: dict[str, str] | None = None,
        *,
        lifetime: float = 60.0,
        audience: str = "kafka",
    ) -> None:
        self.clients = dict(clients or {})
        self.lifetime = lifetime
        self.audience = audience
        # Bound here, on a port the kernel picks, and held until stop(): the URLs below
        # are true from now on and no other process can take the port before start().
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.token_url = f"{self.url}/token"
        self.jwks_url = f"{self.url}/jwks"
        self.key = SigningKey("key-1")
        self.published = [self.key]
        self.refuse = False
        self.down = False
        self.sign_with: SigningKey | None = None  # /token signs with this key when set
        self.requests: Counter[str] = Counter()
        self.issued: list[dict[str, Any]] = []  # claims of every token minted
        self.tokens: list[str] = []  # and the tokens themselves
        self._serving = False

    def start(self) -> OidcIssuer:
        assert not self._serving, "the issuer is serving already (or was stopped)"
        self._serving = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._serving:
            self._server.shutdown()
        self._server.server_close()

    def mint(
        self,
        *,
        sub: str,
        aud: str | list[str] | None = None,
        lifetime: float | None = None,
        key: SigningKey | None = None,
        iss: str | None = None,
        issued_at: float | None = None,
        **claims: Any,
    ) -> str:
        """A signed JWT (by default: this issuer's key, audience and lifetime)."""
        now = time.time() if issued_at is None else issued_at
        body = {
            "iss": self.url if iss is None else iss,
            "sub": sub,
            "aud": self.audience if aud is None else aud,
            "iat": int(now),
            "nbf": int(now),
            "exp": int(now + (self.lifetime if lifetime is None else lifetime)),
            **claims,
        }
        signer = key or self.key
        token = jwt.encode(body, signer.private, algorithm="RS256", headers={"kid": signer.kid})
        self.issued.append(body)
        self.tokens.append(token)
        return token

    def rotate(self) -> None:
        """A new signing key; the old one stays published (as issuers do) for a while."""
        self.key = SigningKey(f"key-{len(self.published) + 1}")
        self.published.append(self.key)


def _handler(issuer: OidcIssuer) -> type[BaseHTTPRequestHandler]:
    """The issuer's routes, reading its settings (``down``, ``refuse``, ...) per request."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            issuer.requests[self.path] += 1
            if issuer.down:
                return self._answer(503, {"error": "temporarily_unavailable"})
            if self.path == "/jwks":
                return self._answer(200, {"keys": [k.jwk() for k in issuer.published]})
            if self.path == "/.well-known/openid-configuration":
                return self._answer(
                    200,
                    {
                        "issuer": issuer.url,
                        "jwks_uri": issuer.jwks_url,
                        "token_endpoint": issuer.token_url,
                        "id_token_signing_alg_values_supported": ["RS256"],
                    },
                )
            self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            issuer.requests[self.path] += 1
            length = int(self.headers.get("content-length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            if issuer.down:
                return self._answer(503, {"error": "temporarily_unavailable"})
            if self.path != "/token":
                return self._answer(404, {"error": "not_found"})
            client = _basic(self.headers.get("authorization", ""))
            if issuer.refuse or client is None or issuer.clients.get(client[0]) != client[1]:
                return self._answer(
                    401, {"error": "invalid_client", "error_description": "bad client"}
                )
            if form.get("grant_type") != ["client_credentials"]:
                return self._answer(400, {"error": "unsupported_grant_type"})
            audience = form.get("audience", [issuer.audience])[0]
            extra: dict[str, Any] = {"scope": form["scope"][0]} if "scope" in form else {}
            token = issuer.mint(sub=client[0], aud=audience, key=issuer.sign_with, **extra)
            self._answer(
                200,
                {"access_token": token, "token_type": "Bearer", "expires_in": issuer.lifetime},
            )

        def _answer(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def service_account_claims(namespace: str, name: str) -> dict[str, Any]:
    """The claims a Kubernetes projected service-account token carries beside sub."""
    return {
        "kubernetes.io": {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": "0b1c2d3e-0000-4000-8000-000000000001"},
            "pod": {"name": f"{name}-driver", "uid": "0b1c2d3e-0000-4000-8000-000000000002"},
        }
    }


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(encoded).decode().partition(":")
    except ValueError:
        return None
    return user, password
