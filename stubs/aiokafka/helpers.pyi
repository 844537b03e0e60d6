import ssl

def create_ssl_context(
    *,
    cafile: str | None = ...,
    capath: str | None = ...,
    cadata: str | bytes | None = ...,
    certfile: str | None = ...,
    keyfile: str | None = ...,
    password: str | None = ...,
) -> ssl.SSLContext: ...
