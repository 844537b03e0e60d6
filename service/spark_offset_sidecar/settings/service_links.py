"""Kubernetes' service-link variables: not settings, though some begin with ``SIDECAR_``
(a Service named ``sidecar`` gives ``SIDECAR_PORT=tcp://...``; docs/run/service.md).

Their shapes are those of kubernetes/kubernetes pkg/kubelet/envvars/envvars.go
(``FromServices``, ``makeLinkVariables``). A variable is one of them only if its name and
its value have these shapes together, so a misspelled setting is still refused as unknown.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping

_PROTOCOLS = ("tcp", "udp", "sctp")
_SERVICE = r"SIDECAR[A-Z0-9_]*"  # a Service's name as a kubelet writes it
_PORT_OF = rf"{_SERVICE}_PORT_(?P<port>[0-9]+)_(?P<proto>TCP|UDP|SCTP)"
_URL = re.compile(
    r"(?P<proto>[a-z]+)://(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<v4>[0-9.]+)):(?P<port>[0-9]+)"
)


def _is_ip(text: str, version: int | None = None) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or address.version == version


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < int(text) < 65536


def _is_url(value: str, proto: str | None = None, port: str | None = None) -> bool:
    """``<proto>://<IP>:<port>`` as a kubelet writes it (of this protocol and port, if given)."""
    url = _URL.fullmatch(value)
    if url is None or url["proto"] not in _PROTOCOLS or not _is_port(url["port"]):
        return False
    if url["v6"] is not None and not _is_ip(url["v6"], 6):
        return False
    if url["v4"] is not None and not _is_ip(url["v4"], 4):
        return False
    return (proto is None or url["proto"] == proto.lower()) and port in (None, url["port"])


_Check = Callable[[re.Match[str], str], bool]
_SHAPES: list[tuple[re.Pattern[str], _Check]] = [
    (re.compile(rf"{_SERVICE}_SERVICE_HOST"), lambda _, value: _is_ip(value)),
    (re.compile(rf"{_SERVICE}_SERVICE_PORT(?:_[A-Z0-9_]+)?"), lambda _, value: _is_port(value)),
    (re.compile(rf"{_SERVICE}_PORT"), lambda _, value: _is_url(value)),
    (re.compile(_PORT_OF), lambda name, value: _is_url(value, name["proto"], name["port"])),
    (re.compile(rf"{_PORT_OF}_PROTO"), lambda name, value: value == name["proto"].lower()),
    (re.compile(rf"{_PORT_OF}_PORT"), lambda name, value: value == name["port"]),
    (re.compile(rf"{_PORT_OF}_ADDR"), lambda _, value: _is_ip(value)),
]


def is_service_link(name: str, value: str) -> bool:
    """Whether ``name=value`` is a variable a kubelet sets for a Service."""
    for shape, check in _SHAPES:
        named = shape.fullmatch(name)
        if named is not None and check(named, value):
            return True
    return False


def service_links(environ: Mapping[str, str]) -> list[str]:
    """The ``SIDECAR_*`` variables of ``environ`` that are Kubernetes' service links, sorted."""
    return sorted(
        name
        for name, value in environ.items()
        if name.startswith("SIDECAR") and is_service_link(name, value)
    )
