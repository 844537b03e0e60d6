import os
import ssl

def create_ssl_context(
    *,
    cafile: str | os.PathLike[str] | None = ...,
    capath: str | os.PathLike[str] | None = ...,
    cadata: str | bytes | None = ...,
    certfile: str | os.PathLike[str] | None = ...,
    keyfile: str | os.PathLike[str] | None = ...,
    password: str | None = ...,
) -> ssl.SSLContext: ...
