"""A TCP proxy that records what the client sends: for tests of what goes on the wire to
a real server (a SASL token and its extensions to a Kafka broker), where the server's own
logs do not show it.

    with WireTap(("127.0.0.1", broker_port)) as tap:
        ... connect to tap.address ...
        assert b"logicalCluster=lkc-1" in tap.sent()
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class WireTap:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        # Listening from here on, on a port the kernel picks: nothing else can take it.
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._sent = bytearray()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def sent(self) -> bytes:
        """Everything clients sent through the tap so far."""
        with self._lock:
            return bytes(self._sent)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, record: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if record:
                    with self._lock:
                        self._sent += chunk
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def __enter__(self) -> WireTap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
