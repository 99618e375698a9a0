"""Ports on 127.0.0.1 for the local control plane's components."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
