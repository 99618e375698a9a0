"""Ports on 127.0.0.1 for the local control plane's components.

A port is chosen here and bound later by another process, so two things can take it in between:
another ``free_port`` call (the OS happily hands a just-closed port out again, so a component once got
the same port for its webhook and its health probe) and an outgoing connection, whose source port the
kernel picks from the ephemeral range. Ports therefore come from below that range, and this process
never hands one out twice.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_LOWEST = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_given: set[int] = set()
_lock = threading.Lock()


def _ephemeral_low() -> int:
    """The first port the kernel uses for outgoing connections (32768 on Linux by default)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now, outside the ephemeral range, not handed out before
    by this process."""
    high = _ephemeral_low()
    with _lock:
        if high - _LOWEST > 2 * len(_given) + 64:
            for _ in range(256):
                port = random.randrange(_LOWEST, high)
                if port not in _given and _bindable(port):
                    _given.add(port)
                    return port
        # A narrow or crowded range: let the OS pick, still never twice.
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _given:
                _given.add(port)
                return port
