"""Job tokens checked against an OIDC issuer's published keys (PyJWT, the ``oidc`` extra)."""
