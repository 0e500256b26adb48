"""Loopback ports for servers the tests and load tests start."""

from __future__ import annotations

import socket


def port_free(port: int) -> bool:
    """Whether a server could bind ``port`` on 127.0.0.1 now (as uvicorn binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(ports: range | None = None) -> int:
    """The first port of ``ports`` nothing listens on; without ``ports``, one the kernel
    hands out as free (anywhere in its ephemeral range)."""
    if ports is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]
    return free_ports(1, ports)[0]


def free_ports(count: int, ports: range) -> list[int]:
    """The first ``count`` ports of ``ports`` nothing listens on."""
    found = []
    for port in ports:
        if port_free(port):
            found.append(port)
            if len(found) == count:
                return found
    raise RuntimeError(f"fewer than {count} free loopback ports in "
                       f"{ports.start}-{ports.stop - 1}")


def pick_port(first: int, last: int, *, skip: tuple[int, ...] = ()) -> int:
    """The first free port in ``first..last`` (inclusive), ``skip`` excepted."""
    for port in range(first, last + 1):
        if port not in skip and port_free(port):
            return port
    raise RuntimeError(f"no free port in {first}-{last}")
