"""Chaos tests: faults between the operator and the API server; ``proxy.py`` is the TCP proxy."""
