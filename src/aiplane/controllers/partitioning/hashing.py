"""The ``desiredHash`` of a NodePartitioning: a fingerprint of what a profile does to a node.

The plan controller stamps ``spec.desiredHash`` on every NodePartitioning and the node state machine
records ``status.currentHash`` once the node is verified; a NodePartitioning whose two hashes differ is
repartitioned. So the hash must change exactly when the *node* would end up different, and never
otherwise:

* It covers only ``dcmProfileName`` (the Device Config Manager profile the node is labelled with) and
  ``expectedResources`` (what verification demands of ``node.status.allocatable``). ``description``
  and ``targetSelector`` are documentation and a guard rail; editing them must not drain a fleet.
  (Upstream G3 hashed the whole inline profile, description included, and G2 hashed the profile's
  ``metadata.generation``, so any edit repartitioned every node.)
* Quantities are compared *by value*, as verification compares them (``Quantity.Equal``): each one is
  written as the kube-canonical spelling of its value in the DecimalSI family
  (``Quantity(...).canonical()``), so ``"64"``, ``64`` and ``"64000m"`` hash alike, and so do ``"1Gi"``,
  ``"1024Mi"`` and ``"1073741824"``. Keeping the original suffix family would have made ``1Gi`` and
  ``1073741824`` differ although no node can tell them apart.
* The JSON is canonical (sorted keys, compact separators, ASCII), so the hash does not depend on key
  order or on which client wrote the profile.

The format is an API: changing it changes every hash and makes every node repartition (cheaply, via the
state machine's "already in desired state" short-circuit, but with a rollout nonetheless). Do not
change it without a migration.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from aiplane.apimachinery.quantity import Quantity

__all__ = ["HASH_PREFIX", "canonical_profile_state", "canonical_quantity", "desired_hash", "hash_json"]

HASH_PREFIX: Final = "sha256:"


def canonical_quantity(value: object) -> str:
    """The spelling of a quantity's *value*, independent of how it was written.

    ``Quantity(value)`` parses exactly as kube does; rebuilding it from its exact decimal value drops
    the suffix family, and ``canonical()`` then picks kube's canonical DecimalSI spelling (``"1k"``,
    ``"1500m"``, ``"1073741824"``). Raises :class:`ValueError` for anything that is not a quantity
    (a bool, ``None``, ``"abc"``) so a malformed profile is reported rather than hashed.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal | Quantity):
        raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
    q = Quantity(value)
    return Quantity.from_decimal(q.as_decimal()).canonical()


def canonical_profile_state(profile_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a PartitioningProfile spec that changes a node, in canonical form.

    ``{"dcmProfileName": str, "expectedResources": {resource: canonical quantity}}``; an absent
    ``expectedResources`` and an empty one are the same state (no check). Raises :class:`ValueError`
    naming the field when the spec is not usable (no ``dcmProfileName``, a bad quantity).
    """
    if not isinstance(profile_spec, Mapping):
        raise ValueError("a profile spec must be an object")
    dcm = profile_spec.get("dcmProfileName")
    if not isinstance(dcm, str) or not dcm:
        raise ValueError("spec.dcmProfileName: Required value: must be a non-empty string")
    raw = profile_spec.get("expectedResources") or {}
    if not isinstance(raw, Mapping):
        raise ValueError("spec.expectedResources: Invalid value: must be a map of quantities")
    resources: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"spec.expectedResources: Invalid key {name!r}: must be a resource name")
        try:
            resources[name] = canonical_quantity(value)
        except ValueError as exc:
            raise ValueError(f"spec.expectedResources[{name}]: {exc}") from None
    return {"dcmProfileName": dcm, "expectedResources": resources}


def hash_json(value: Any) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``value`` (sorted keys, no spaces, ASCII)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return HASH_PREFIX + hashlib.sha256(text.encode("ascii")).hexdigest()


def desired_hash(profile_spec: Mapping[str, Any]) -> str:
    """The ``desiredHash`` for a node partitioned with this PartitioningProfile spec.

    Stable across key order, equivalent quantity spellings and edits to ``description`` or
    ``targetSelector``; raises :class:`ValueError` for a spec that cannot be applied.
    """
    return hash_json(canonical_profile_state(profile_spec))
