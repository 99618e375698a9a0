"""PLACEHOLDER — replaced at merge by the real etcd cleanup (another helper's module).

The DCD controller's finalizer calls :func:`delete_component_keys` before letting a DCD go; this
placeholder does nothing.
"""

from __future__ import annotations


async def delete_component_keys(endpoints: str, dynamo_namespace: str, service_name: str) -> None:
    """Delete the keys under ``/<dynamo_namespace>/components/<service_name>`` (placeholder: no-op)."""
    return None
