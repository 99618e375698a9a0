"""Chaos tests: faults between the operator and the API server (issue 16); ``proxy.py`` is the TCP proxy."""
