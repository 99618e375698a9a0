"""Defaulting from ``default`` keywords, with apiextensions-apiserver's semantics.

kube-apiserver applies CRD defaults when it decodes a request and again when it reads from etcd
(``defaulting.Default``). Reproducing it offline lets ``aiplane validate`` and our tests see the
object the server would store: the rollout block a user left out comes back with ``maxParallel: 1``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aiplane.schema.prune import META_FIELDS

Schema = Mapping[str, Any]


def apply_defaults(obj: Any, schema: Schema | None, *, root: bool = True) -> None:
    """Fill in defaults in place.

    A property's default is applied when its parent object exists and the key is absent (or ``null``
    while the property is not ``nullable``). Defaulting then descends into every value, the ones it
    just inserted included, so defaults inside defaults are defaulted too. ``items`` and
    ``additionalProperties`` are followed; a non-nullable ``null`` list item or map value takes the
    item/value schema's default. With ``root`` (a whole resource) ``apiVersion``, ``kind`` and
    ``metadata`` are left alone: kube forbids defaults there and handles them as object meta.
    """
    _default(obj, schema, skip_meta=root)


def _non_nullable_null(x: Any, s: Schema | None) -> bool:
    return x is None and s is not None and not s.get("nullable")


def _default(x: Any, s: Schema | None, *, skip_meta: bool = False) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        props: Mapping[str, Any] = s.get("properties") or {}
        for k, prop in props.items():
            if skip_meta and k in META_FIELDS:
                continue
            default = prop.get("default")
            if default is None:
                continue
            if k not in x or _non_nullable_null(x[k], prop):
                x[k] = copy.deepcopy(default)
        additional = s.get("additionalProperties")
        for k in list(x):
            if skip_meta and k in META_FIELDS:
                continue
            if k in props:
                _default(x[k], props[k])
            elif isinstance(additional, Mapping):
                if _non_nullable_null(x[k], additional):
                    x[k] = copy.deepcopy(additional.get("default"))
                _default(x[k], additional)
    elif isinstance(x, list):
        items = s.get("items")
        if not isinstance(items, Mapping):
            return
        for i in range(len(x)):
            if _non_nullable_null(x[i], items):
                x[i] = copy.deepcopy(items.get("default"))
            _default(x[i], items)
