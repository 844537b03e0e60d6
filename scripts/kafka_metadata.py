"""Ask a Kafka broker for cluster metadata, with nothing but the standard library.

``python3 scripts/kafka_metadata.py HOST:PORT`` exits 0 and prints the brokers once a
MetadataRequest (v4, the oldest version Kafka 4.x still serves) is answered with at least
one broker, and exits 1 otherwise. ``local-kafka.sh`` uses it to wait for readiness
without a Python environment or Kafka client installed.
"""

from __future__ import annotations

import socket
import struct
import sys

METADATA_API_KEY = 3
METADATA_VERSION = 4
CLIENT_ID = b"local-kafka-probe"


def _request() -> bytes:
    header = struct.pack(">hhih", METADATA_API_KEY, METADATA_VERSION, 1, len(CLIENT_ID))
    # topics = null (all topics), allow_auto_topic_creation = false
    body = struct.pack(">i?", -1, False)
    payload = header + CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.extend(chunk)
    return bytes(chunks)


def _string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if length < 0:
        return None, pos
    return buf[pos : pos + length].decode(), pos + length


def brokers(bootstrap: str, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(_request())
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        buf = _read_exactly(sock, size)
    # correlation_id, throttle_time_ms, [brokers]
    pos = 8
    (count,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    found = []
    for _ in range(count):
        (node_id,) = struct.unpack_from(">i", buf, pos)
        broker_host, pos = _string(buf, pos + 4)
        (broker_port,) = struct.unpack_from(">i", buf, pos)
        _rack, pos = _string(buf, pos + 4)
        found.append((node_id, broker_host or "", broker_port))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: kafka_metadata.py HOST:PORT", file=sys.stderr)
        return 2
    try:
        found = brokers(argv[1])
    except (OSError, struct.error) as exc:
        print(f"no metadata from {argv[1]}: {exc}", file=sys.stderr)
        return 1
    if not found:
        print(f"{argv[1]} answered metadata with no brokers", file=sys.stderr)
        return 1
    for node_id, host, port in found:
        print(f"broker {node_id} at {host}:{port}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
