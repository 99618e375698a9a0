"""Server-side apply and ``metadata.managedFields``, as kube-apiserver's field manager does them.

kube-apiserver tracks, for every object, which *manager* (a ``fieldManager`` query parameter or the
client's User-Agent) owns which fields, and uses that to merge apply configurations. The work is
done by ``k8s.io/apimachinery/pkg/util/managedfields`` on top of sigs.k8s.io/structured-merge-diff
(SMD); this module is a port of both, on plain dicts:

* a *field set* (:class:`FieldSet`) is a tree of path elements — ``f:name`` (a field or map key),
  ``k:{"name":"x"}`` (a list-map item), ``v:"x"`` (a set item), ``i:0`` (an atomic list index) —
  serialized as ``fieldsV1`` exactly the way SMD writes it;
* the *schema walkers* (:func:`to_field_set`, :func:`merge`, :func:`compare`, :func:`remove_items`)
  follow the kind's structural schema: ``x-kubernetes-list-type`` ``atomic``/``set``/``map``,
  ``x-kubernetes-map-type``, declared fields versus map entries, untyped (``preserve-unknown``)
  values treated as SMD's *deduced* type;
* :func:`apply` is ``FieldManager.Apply`` (version check, ``before-first-apply``, merge, prune of
  fields the manager stopped applying, conflicts, the last-applied annotation of ``kubectl``);
* :class:`FieldManager` is installed as ``Api.managed_fields_hook`` and records the ``Update``
  entries of every other write (create, update, patch), taking changed fields away from other
  managers, as ``FieldManager.UpdateNoErrors`` does.

Intended differences are listed in ``docs/sim.md`` ("Patch and server-side apply").
"""

from __future__ import annotations

import contextvars
import copy
import functools
import json
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from aiplane.apimachinery import builtin
from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_float, go_json, go_quote
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import WriteOptions, rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api

Schema = Mapping[str, Any]
Obj = dict[str, Any]

LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
#: kube's ``DefaultMaxUpdateManagers``: older Update entries are merged into ``ancient-changes``.
MAX_UPDATE_MANAGERS: Final = 10
FIELD_MANAGER_MAX_LENGTH: Final = 128

#: The User-Agent of the request being served (set by the HTTP layer): kube names a write's manager
#: after it when the request has no ``fieldManager``.
REQUEST_USER_AGENT: contextvars.ContextVar[str] = contextvars.ContextVar(
    "aiplane_sim_request_user_agent", default=""
)


class _Absent:
    """SMD's ``nil`` value: the field is not there at all (JSON ``null`` is a present value)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


# ================================================================================================
# values: ordering, equality and Go formatting the way SMD's ``value`` package does them
# ================================================================================================


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _rank(v: Any) -> int:
    """``value.Compare``'s order of kinds: numbers < strings < booleans < lists < maps < null."""
    if v is None:
        return 5
    if isinstance(v, bool):
        return 2
    if _is_num(v):
        return 0
    if isinstance(v, str):
        return 1
    if isinstance(v, list):
        return 3
    return 4


def value_compare(a: Any, b: Any) -> int:
    """``value.Compare``: a total order over JSON values."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return -1 if ra < rb else 1
    if ra in {0, 1, 2}:
        return int(a > b) - int(a < b)
    if ra == 3:
        for x, y in zip(a, b, strict=False):
            c = value_compare(x, y)
            if c:
                return c
        return (len(a) > len(b)) - (len(a) < len(b))
    if ra == 4:
        ka, kb = sorted(a), sorted(b)
        for i in range(max(len(ka), len(kb))):
            if i >= len(ka):
                return -1
            if i >= len(kb):
                return 1
            if ka[i] != kb[i]:
                return -1 if ka[i] < kb[i] else 1
            c = value_compare(a[ka[i]], b[kb[i]])
            if c:
                return c
        return 0
    return 0


def value_equal(a: Any, b: Any) -> bool:
    """``value.Equals``: numbers compare numerically (``1 == 1.0``), booleans are not numbers."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and len(a) == len(b)
            and all(k in b and value_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(value_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if _rank(a) != _rank(b):
        return False
    return bool(a == b)


def _canon(v: Any) -> Any:
    """A hashable form of a scalar that makes equal what :func:`value_equal` makes equal."""
    if v is None:
        return ("z",)
    if isinstance(v, bool):
        return ("b", v)
    if _is_num(v):
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            return ("n", int(v))
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    return ("j", go_json(v))


def value_string(v: Any) -> str:
    """``value.ToString`` (how SMD prints values in paths: ``[name="nginx"]``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return "[" + ",".join(value_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "".join(f"{k}={value_string(v[k])}" for k in sorted(v))
    return str(v)


def _go_v(v: Any) -> str:
    """Go's ``%v`` of a decoded JSON value (``map[a:1]``, ``[a b]``, ``<nil>``)."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "[" + " ".join(_go_v(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{_go_v(v[k])}" for k in sorted(v)) + "]"
    return str(v)


def _go_sharp_v(v: Any) -> str:
    """Go's ``%#v`` of a decoded JSON value."""
    if v is None:
        return "interface {}(nil)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(_go_sharp_v(x) for x in v) + "}"
    if isinstance(v, dict):
        items = ", ".join(f"{go_quote(k)}:{_go_sharp_v(v[k])}" for k in sorted(v))
        return "map[string]interface {}{" + items + "}"
    return str(v)


def _go_type(v: Any) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "[]interface {}"
    return "map[string]interface {}"


# ================================================================================================
# path elements and field sets (sigs.k8s.io/structured-merge-diff/fieldpath)
# ================================================================================================

_KIND_ORDER: Final = {"f": 0, "k": 1, "v": 2, "i": 3}


class PathElement:
    """One step of a field path: ``f`` field/map key, ``k`` list-map key, ``v`` set value, ``i`` index."""

    __slots__ = ("_canon", "kind", "payload")

    def __init__(self, kind: str, payload: Any) -> None:
        self.kind = kind
        self.payload = payload
        if kind == "k":
            self._canon: Any = ("k", tuple((n, _canon(v)) for n, v in payload))
        elif kind == "v":
            self._canon = ("v", _canon(payload))
        else:
            self._canon = (kind, payload)

    @classmethod
    def field(cls, name: str) -> PathElement:
        return cls("f", name)

    @classmethod
    def key(cls, fields: list[tuple[str, Any]]) -> PathElement:
        return cls("k", tuple(sorted(fields, key=lambda f: f[0])))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PathElement) and self._canon == other._canon

    def __hash__(self) -> int:
        return hash(self._canon)

    def compare(self, other: PathElement) -> int:
        """``PathElement.Compare``."""
        if self.kind != other.kind:
            return -1 if _KIND_ORDER[self.kind] < _KIND_ORDER[other.kind] else 1
        if self.kind in ("f", "i"):
            return int(self.payload > other.payload) - int(self.payload < other.payload)
        if self.kind == "v":
            return value_compare(self.payload, other.payload)
        mine, theirs = self.payload, other.payload
        for (na, va), (nb, vb) in zip(mine, theirs, strict=False):
            if na != nb:
                return -1 if na < nb else 1
            c = value_compare(va, vb)
            if c:
                return c
        return (len(mine) > len(theirs)) - (len(mine) < len(theirs))

    def __lt__(self, other: PathElement) -> bool:
        return self.compare(other) < 0

    def __str__(self) -> str:
        """``PathElement.String()``: ``.name``, ``[name="x"]``, ``[="x"]``, ``[0]``."""
        if self.kind == "f":
            return "." + str(self.payload)
        if self.kind == "k":
            return "[" + ",".join(f"{n}={value_string(v)}" for n, v in self.payload) + "]"
        if self.kind == "v":
            return f"[={value_string(self.payload)}]"
        return f"[{self.payload}]"

    def __repr__(self) -> str:
        return f"PathElement({self.serialize()})"

    def serialize(self) -> str:
        """The ``fieldsV1`` key: ``f:name``, ``k:{"name":"x"}``, ``v:"x"``, ``i:0``."""
        if self.kind == "f":
            return "f:" + str(self.payload)
        if self.kind == "k":
            return "k:{" + ",".join(f"{go_json(n)}:{go_json(v)}" for n, v in self.payload) + "}"
        if self.kind == "v":
            return "v:" + go_json(self.payload)
        return f"i:{self.payload}"

    @classmethod
    def deserialize(cls, text: str) -> PathElement | None:
        """``DeserializePathElement``; ``None`` for unknown element types (SMD skips those)."""
        if len(text) < 2:
            raise ValueError("key must be 2 characters long:")
        if text[1] != ":":
            return None
        kind, rest = text[0], text[2:]
        if kind == "f":
            return cls.field(rest)
        if kind == "v":
            return cls("v", json.loads(rest))
        if kind == "k":
            decoded = json.loads(rest)
            if not isinstance(decoded, dict):
                raise ValueError(f"expected an object in {text!r}")
            return cls.key(list(decoded.items()))
        if kind == "i":
            return cls("i", int(rest))
        return None


Path = tuple[PathElement, ...]


def path_string(path: Path) -> str:
    """``fieldpath.Path.String()``."""
    return "".join(str(pe) for pe in path)


def _pe_cmp(a: PathElement, b: PathElement) -> int:
    return a.compare(b)


def _sorted_pes(pes: Any) -> list[PathElement]:
    return sorted(pes, key=functools.cmp_to_key(_pe_cmp))


class FieldSet:
    """``fieldpath.Set``: members (paths owned here) and children (sets under a path element)."""

    __slots__ = ("children", "members")

    def __init__(
        self, members: set[PathElement] | None = None, children: dict[PathElement, FieldSet] | None = None
    ) -> None:
        self.members: set[PathElement] = members if members is not None else set()
        self.children: dict[PathElement, FieldSet] = children if children is not None else {}

    @classmethod
    def of(cls, *paths: Path) -> FieldSet:
        out = cls()
        for p in paths:
            out.insert(p)
        return out

    def insert(self, path: Path) -> None:
        if not path:
            return  # nobody owns "the entire object"
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.members.add(path[-1])

    def has(self, path: Path) -> bool:
        if not path:
            return False
        node: FieldSet | None = self
        for pe in path[:-1]:
            assert node is not None
            node = node.children.get(pe)
            if node is None:
                return False
        assert node is not None
        return path[-1] in node.members

    def empty(self) -> bool:
        return not self.members and all(c.empty() for c in self.children.values())

    def with_prefix(self, pe: PathElement) -> FieldSet:
        return self.children.get(pe) or FieldSet()

    def copy(self) -> FieldSet:
        return FieldSet(set(self.members), {pe: c.copy() for pe, c in self.children.items()})

    def union(self, other: FieldSet) -> FieldSet:
        children = {pe: c.copy() for pe, c in self.children.items()}
        for pe, c in other.children.items():
            children[pe] = children[pe].union(c) if pe in children else c.copy()
        return FieldSet(self.members | other.members, children)

    def difference(self, other: FieldSet) -> FieldSet:
        """Members of ``other`` leave; a member of ``other`` does not remove children here."""
        children: dict[PathElement, FieldSet] = {}
        for pe, c in self.children.items():
            theirs = other.children.get(pe)
            if theirs is None:
                children[pe] = c.copy()
            else:
                d = c.difference(theirs)
                if not d.empty():
                    children[pe] = d
        return FieldSet(self.members - other.members, children)

    def recursive_difference(self, other: FieldSet) -> FieldSet:
        """Like :meth:`difference`, but a member of ``other`` also removes everything below it."""
        children: dict[PathElement, FieldSet] = {}
        for pe, c in self.children.items():
            if pe in other.members:
                continue
            theirs = other.children.get(pe)
            if theirs is None:
                children[pe] = c.copy()
            else:
                d = c.recursive_difference(theirs)
                if not d.empty():
                    children[pe] = d
        return FieldSet(self.members - other.members, children)

    def intersection(self, other: FieldSet) -> FieldSet:
        children: dict[PathElement, FieldSet] = {}
        for pe, c in self.children.items():
            theirs = other.children.get(pe)
            if theirs is not None:
                i = c.intersection(theirs)
                if not i.empty():
                    children[pe] = i
        return FieldSet(self.members & other.members, children)

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """``Set.Iterate``: members in order, then each child's paths, recursively."""
        for pe in _sorted_pes(self.members):
            yield (*prefix, pe)
        for pe in _sorted_pes(self.children):
            yield from self.children[pe].paths((*prefix, pe))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSet):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FieldSet({json.dumps(self.to_json())})"

    def to_json(self) -> dict[str, Any]:
        """The ``fieldsV1`` object, in SMD's order (a path that is also a parent gets ``"."`` last)."""
        out: dict[str, Any] = {}
        for pe in _sorted_pes(self.members | set(self.children)):
            child = self.children.get(pe)
            if child is None or child.empty():
                out[pe.serialize()] = {}
                continue
            body = child.to_json()
            if pe in self.members:
                body["."] = {}
            out[pe.serialize()] = body
        return out

    @classmethod
    def from_json(cls, data: Any) -> FieldSet:
        """``Set.FromJSON`` (unknown path element types are skipped, as SMD does)."""
        if not isinstance(data, dict):
            raise ValueError("fieldsV1 must be an object")
        out = cls()
        for key, sub in data.items():
            if key == ".":
                continue
            pe = PathElement.deserialize(key)
            if pe is None:
                continue
            if not isinstance(sub, dict):
                raise ValueError(f"fieldsV1 entry {key!r} must be an object")
            if not sub or "." in sub:
                out.members.add(pe)
            grandchildren = {k: v for k, v in sub.items() if k != "."}
            if grandchildren:
                child = cls.from_json(grandchildren)
                if not child.empty():
                    out.children[pe] = child
        return out


#: What ``NewStripMetaManager`` keeps out of every manager's set.
STRIPPED: Final = FieldSet.of(
    (PathElement.field("apiVersion"),),
    (PathElement.field("kind"),),
    (PathElement.field("metadata"),),
    *(
        (PathElement.field("metadata"), PathElement.field(name))
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    ),
)


# ================================================================================================
# schema: what SMD's type converter makes of a structural schema
# ================================================================================================


@functools.cache
def _object_meta_schema() -> dict[str, Any]:
    return builtin.structural("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")


_STRING: Final[dict[str, Any]] = {"type": "string"}


def resource_schema(rt: ResourceType) -> Schema | None:
    """The schema SMD types objects of ``rt`` with: the kind's schema plus TypeMeta and ObjectMeta."""
    try:
        schema = rt.schema()
    except ValueError:
        schema = None
    return _with_meta(schema)


def _with_meta(schema: Schema | None) -> Schema:
    base: Mapping[str, Any] = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props = dict(base.get("properties") or {})
    props.update({"apiVersion": _STRING, "kind": _STRING, "metadata": _object_meta_schema()})
    return {**base, "type": "object", "properties": props}


def _atom(s: Schema | None, v: Any) -> str:
    """``scalar``, ``map`` or ``list``: the schema's kind, or the value's when the schema is untyped."""
    if s is not None and not s.get("x-kubernetes-int-or-string"):
        t = s.get("type")
        if t == "object" or "properties" in s or "additionalProperties" in s:
            return "map"
        if t == "array" or "items" in s:
            return "list"
        if t in ("string", "integer", "number", "boolean"):
            return "scalar"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "list"
    return "scalar"


def _is_deduced(s: Schema | None) -> bool:
    if s is None:
        return True
    if s.get("x-kubernetes-int-or-string"):
        return False
    return not (s.get("type") or "properties" in s or "additionalProperties" in s or "items" in s)


def _map_atomic(s: Schema | None) -> bool:
    return s is not None and s.get("x-kubernetes-map-type") == "atomic"


def _fields(s: Schema | None) -> Mapping[str, Any]:
    if s is None:
        return {}
    props: Mapping[str, Any] = s.get("properties") or {}
    if s.get("x-kubernetes-embedded-resource"):
        props = {**props, "apiVersion": _STRING, "kind": _STRING, "metadata": _object_meta_schema()}
    return props


_UNDECLARED: Final = object()


def _child_schema(s: Schema | None, key: str) -> Any:
    """The schema of map key ``key``; ``_UNDECLARED`` when the map does not allow it."""
    if s is None or _is_deduced(s):
        return None
    fields = _fields(s)
    if key in fields:
        return fields[key]
    extra = s.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra
    if extra is True or s.get("x-kubernetes-preserve-unknown-fields"):
        return None
    return _UNDECLARED


def _is_declared(s: Schema | None, key: str) -> bool:
    return s is not None and key in _fields(s)


def _is_struct(s: Schema | None) -> bool:
    """A Go struct (named fields): the kind of value kube always has, even when empty."""
    return (
        s is not None
        and bool(s.get("properties"))
        and not _map_atomic(s)
        and not isinstance(s.get("additionalProperties"), Mapping)
    )


def _list_type(s: Schema | None) -> tuple[str, list[str]]:
    """(``atomic``|``set``|``map``, keys). Untyped lists are atomic."""
    if s is None or _is_deduced(s):
        return "atomic", []
    lt = s.get("x-kubernetes-list-type") or "atomic"
    keys = list(s.get("x-kubernetes-list-map-keys") or []) if lt == "map" else []
    return str(lt), keys


def _items(s: Schema | None) -> Schema | None:
    if s is None:
        return None
    items = s.get("items")
    return items if isinstance(items, Mapping) else None


class SmdError(Exception):
    """A structured-merge-diff error; ``str()`` is its text as kube prints it."""


def _item_pe(s: Schema | None, index: int, item: Any) -> PathElement:
    """``listItemToPathElement``."""
    lt, keys = _list_type(s)
    if lt == "atomic":
        return PathElement("i", index)
    if keys:
        if item is None:
            raise SmdError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise SmdError("associative list with keys may not have non-map elements")
        item_schema = _items(s)
        fields: list[tuple[str, Any]] = []
        for key in keys:
            if key in item:
                fields.append((key, item[key]))
                continue
            prop = _fields(item_schema).get(key)
            if isinstance(prop, Mapping) and "default" in prop:
                fields.append((key, prop["default"]))
                continue
            raise SmdError(
                f"associative list with keys has an element that omits key field {go_quote(key)} "
                "(and doesn't have default value)"
            )
        return PathElement.key(fields)
    if isinstance(item, dict):
        raise SmdError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise SmdError("not supported: associative list with lists as elements")
    if item is None:
        raise SmdError("associative list without keys has an element that's an explicit null")
    return PathElement("v", item)


def _index_items(s: Schema | None, items: list[Any]) -> tuple[list[PathElement], dict[PathElement, Any]]:
    """Path elements of a list's items in order; repeated elements keep their first item."""
    order: list[PathElement] = []
    seen: dict[PathElement, Any] = {}
    for i, item in enumerate(items):
        try:
            pe = _item_pe(s, i, item)
        except SmdError:
            continue
        if pe in seen:
            continue
        seen[pe] = item
        order.append(pe)
    return order, seen


# ================================================================================================
# validation of an applied configuration (``ObjectToTyped``)
# ================================================================================================


def validate(value: Any, s: Schema | None) -> list[str]:
    """SMD's validation of an applied object; each error reads ``.path: message``."""
    out: list[str] = []
    _validate(value, s, "", out)
    return out


def _validate(v: Any, s: Schema | None, path: str, out: list[str]) -> None:
    atom = _atom(s, v)
    if atom == "scalar":
        msg = _scalar_error(s, v)
        if msg:
            out.append(_at(path, msg))
        return
    if atom == "list":
        if v is None:
            return
        if not isinstance(v, list):
            out.append(_at(path, f"expected list, got {_go_unstructured_v(v)}"))
            return
        lt, _ = _list_type(s)
        elem = _items(s)
        seen: set[PathElement] = set()
        for i, item in enumerate(v):
            if lt == "atomic":
                pe = PathElement("i", i)
            else:
                try:
                    pe = _item_pe(s, i, item)
                except SmdError as exc:
                    out.append(_at(path, f"element {i}: {exc}"))
                    return
                if pe in seen:
                    out.append(_at(path, f"duplicate entries for key {pe}"))
                seen.add(pe)
            _validate(item, elem, path + str(pe), out)
        return
    if v is None:
        return
    if not isinstance(v, dict):
        out.append(_at(path, f"expected map, got {_go_unstructured_v(v)}"))
        return
    for key, val in v.items():
        child = _child_schema(s, key)
        if child is _UNDECLARED:
            out.append(_at(path + "." + key, "field not declared in schema"))
            return
        _validate(val, child, path + "." + key, out)


def _go_unstructured_v(v: Any) -> str:
    """``%v`` of an SMD ``valueUnstructured`` (``&{...}``)."""
    return "&{" + _go_v(v) + "}"


def _scalar_error(s: Schema | None, v: Any) -> str | None:
    if v is None or s is None:
        return None
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string") or not t:
        if isinstance(v, dict | list):
            return f"expected any scalar, got {_go_unstructured_v(v)}"
        return None
    if t in ("integer", "number"):
        if not _is_num(v):
            return f"expected numeric (int or float), got {_go_type(v)}"
    elif t == "string":
        if not isinstance(v, str):
            return f"expected string, got &value.valueUnstructured{{Value:{_go_sharp_v(v)}}}"
    elif t == "boolean" and not isinstance(v, bool):
        return f"expected boolean, got {_go_unstructured_v(v)}"
    return None


def _at(path: str, msg: str) -> str:
    return f"{path}: {msg}" if path else msg


# ================================================================================================
# the walkers: ToFieldSet, Merge, Compare, RemoveItems, EnsureNamedFieldsAreMembers
# ================================================================================================


def to_field_set(value: Any, s: Schema | None) -> FieldSet:
    """``TypedValue.ToFieldSet``: every leaf and list/map item the value mentions."""
    out = FieldSet()
    _tfs(value, s, (), out)
    return out


def _tfs(v: Any, s: Schema | None, path: Path, out: FieldSet) -> None:
    atom = _atom(s, v)
    if atom == "scalar":
        out.insert(path)
        return
    if atom == "list":
        lt, _ = _list_type(s)
        if lt == "atomic":
            out.insert(path)
            return
        if not isinstance(v, list):
            return
        elem = _items(s)
        for i, item in enumerate(v):
            try:
                pe = _item_pe(s, i, item)
            except SmdError:
                continue
            _tfs(item, elem, (*path, pe), out)
            out.insert((*path, pe))
        return
    if _map_atomic(s):
        out.insert(path)
        return
    if not isinstance(v, dict):
        return
    for key, val in v.items():
        child = _child_schema(s, key)
        pe = PathElement.field(key)
        _tfs(val, None if child is _UNDECLARED else child, (*path, pe), out)
        if not _is_declared(s, key):
            out.insert((*path, pe))


def merge(lhs: Any, rhs: Any, s: Schema | None) -> Any:
    """``TypedValue.Merge``: ``rhs`` (an applied configuration) merged into ``lhs`` (the live object).

    Either side may be :data:`ABSENT`; the result is :data:`ABSENT` when nothing is left.
    """
    if rhs is ABSENT:
        return copy.deepcopy(lhs)
    atom = _atom(s, rhs)
    if lhs is not ABSENT and _atom(s, lhs) != atom:
        lhs = ABSENT
    if atom == "scalar":
        return copy.deepcopy(rhs)
    if atom == "list":
        lt, _ = _list_type(s)
        lhs_l = lhs if isinstance(lhs, list) else None
        rhs_l = rhs if isinstance(rhs, list) else None
        if lt == "atomic" or (not lhs_l and not rhs_l):
            return copy.deepcopy(rhs)
        merged = _merge_list_items(lhs_l or [], rhs_l or [], s)
        return merged if merged else ABSENT
    lhs_m = lhs if isinstance(lhs, dict) else None
    rhs_m = rhs if isinstance(rhs, dict) else None
    if _map_atomic(s) or (not lhs_m and not rhs_m):
        return copy.deepcopy(rhs)
    out: dict[str, Any] = {}
    lhs_m = lhs_m or {}
    rhs_m = rhs_m or {}
    for key in [*lhs_m, *(k for k in rhs_m if k not in lhs_m)]:
        child = _child_schema(s, key)
        m = merge(lhs_m.get(key, ABSENT), rhs_m.get(key, ABSENT), None if child is _UNDECLARED else child)
        if m is not ABSENT:
            out[key] = m
    return out if out else ABSENT


def _merge_list_items(lhs: list[Any], rhs: list[Any], s: Schema | None) -> list[Any]:
    """The merging walker's ``visitListItems``: RHS order, LHS-only items kept in place."""
    elem = _items(s)
    rhs_order, observed_rhs = _index_items(s, rhs)
    lhs_order, observed_lhs = _index_items(s, lhs)
    shared = [pe for pe in rhs_order if pe in observed_lhs]
    next_shared = shared.pop(0) if shared else None
    out: list[Any] = []

    def item(pe: PathElement, left: Any, right: Any) -> None:
        m = merge(left, right, elem)
        if m is not ABSENT:
            out.append(m)

    li = ri = 0
    while li < len(lhs_order) or ri < len(rhs_order):
        if li < len(lhs_order) and ri < len(rhs_order):
            pe = lhs_order[li]
            if pe == rhs_order[ri]:
                item(pe, observed_lhs[pe], observed_rhs[pe])
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in observed_rhs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_order):
            pe = lhs_order[li]
            if pe not in observed_rhs:
                item(pe, observed_lhs[pe], ABSENT)
                li += 1
                continue
        if ri < len(rhs_order):
            pe = rhs_order[ri]
            item(pe, observed_lhs.get(pe, ABSENT), observed_rhs[pe])
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


@dataclass
class Comparison:
    """``typed.Comparison``: what ``rhs`` removed, modified and added relative to ``lhs``."""

    removed: FieldSet = field(default_factory=FieldSet)
    modified: FieldSet = field(default_factory=FieldSet)
    added: FieldSet = field(default_factory=FieldSet)

    def exclude(self, ignored: FieldSet | None) -> Comparison:
        """``ExcludeFields``: drop everything at or below ``ignored``."""
        if ignored is None:
            return self
        return Comparison(
            self.removed.recursive_difference(ignored),
            self.modified.recursive_difference(ignored),
            self.added.recursive_difference(ignored),
        )

    def same(self) -> bool:
        return self.removed.empty() and self.modified.empty() and self.added.empty()


def compare(lhs: Any, rhs: Any, s: Schema | None, *, zero_structs: bool = False) -> Comparison:
    """``TypedValue.Compare``.

    With ``zero_structs`` a declared field missing on one side takes the value a Go struct has
    there when its parent is present (see :func:`_go_zero`): built-in kinds are Go structs, whose
    struct fields always exist, so kube never reports such a field itself as added or removed.
    """
    out = Comparison()
    _compare(lhs, rhs, s, (), out, zero_structs)
    return out


def _compare(l: Any, r: Any, s: Schema | None, path: Path, out: Comparison, zero: bool) -> None:  # noqa: E741
    atom_l = _atom(s, l) if l is not ABSENT else None
    atom_r = _atom(s, r) if r is not ABSENT else None
    atom = atom_r or atom_l
    if atom_l and atom_r and atom_l != atom_r:
        atom = "scalar"  # a deduced value that changed kind: compare it as a whole
    if atom == "list":
        lt, _ = _list_type(s)
        lhs_l = l if isinstance(l, list) else None
        rhs_l = r if isinstance(r, list) else None
        if lt == "atomic" or (not lhs_l and not rhs_l):
            _leaf(l, r, path, out)
            return
        elem = _items(s)
        lhs_order, observed_lhs = _index_items(s, lhs_l or [])
        rhs_order, observed_rhs = _index_items(s, rhs_l or [])
        for pe in [*lhs_order, *(p for p in rhs_order if p not in observed_lhs)]:
            _compare(observed_lhs.get(pe, ABSENT), observed_rhs.get(pe, ABSENT), elem, (*path, pe), out, zero)
        _post(l, r, path, out)
        return
    if atom == "map":
        lhs_m = l if isinstance(l, dict) else None
        rhs_m = r if isinstance(r, dict) else None
        if _map_atomic(s) or (not lhs_m and not rhs_m):
            _leaf(l, r, path, out)
            return
        lhs_m = lhs_m or {}
        rhs_m = rhs_m or {}
        for key in [*lhs_m, *(k for k in rhs_m if k not in lhs_m)]:
            child = _child_schema(s, key)
            cs = None if child is _UNDECLARED else child
            lv = lhs_m.get(key, ABSENT)
            rv = rhs_m.get(key, ABSENT)
            if zero:
                if lv is ABSENT and l is not ABSENT:
                    lv = _go_zero(s, key, cs)
                if rv is ABSENT and r is not ABSENT:
                    rv = _go_zero(s, key, cs)
            _compare(lv, rv, cs, (*path, PathElement.field(key)), out, zero)
        _post(l, r, path, out)
        return
    _leaf(l, r, path, out)


def _go_zero(parent: Schema | None, key: str, child: Schema | None) -> Any:
    """What a Go struct has in field ``key`` when the JSON lacks it.

    A struct field is an empty struct; a field serialized without ``omitempty`` (the OpenAPI
    document marks those ``required``) is ``null``; anything else is really absent.
    """
    if _is_struct(child):
        return {}
    if parent is not None and key in (parent.get("required") or ()):
        return None
    return ABSENT


def _leaf(l: Any, r: Any, path: Path, out: Comparison) -> None:  # noqa: E741
    if l is ABSENT:
        out.added.insert(path)
    elif r is ABSENT:
        out.removed.insert(path)
    elif not value_equal(l, r):
        out.modified.insert(path)


def _post(l: Any, r: Any, path: Path, out: Comparison) -> None:  # noqa: E741
    if l is ABSENT:
        out.added.insert(path)
    elif r is ABSENT:
        out.removed.insert(path)


def remove_items(value: Any, to_remove: FieldSet, s: Schema | None) -> Any:
    """``TypedValue.RemoveItems``: drop every field and item ``to_remove`` names (with its subtree).

    As in SMD, a map or list that ends up empty becomes ``None``.
    """
    atom = _atom(s, value)
    if atom == "scalar":
        return value
    if atom == "list":
        if not isinstance(value, list) or not value:
            return None
        lt, _ = _list_type(s)
        if lt == "atomic":
            return None
        elem = _items(s)
        kept: list[Any] = []
        for i, item in enumerate(value):
            try:
                pe = _item_pe(s, i, item)
            except SmdError:
                kept.append(item)
                continue
            if pe in to_remove.members:
                continue
            sub = to_remove.children.get(pe)
            kept.append(remove_items(item, sub, elem) if sub is not None and not sub.empty() else item)
        return kept if kept else None
    if not isinstance(value, dict) or not value or _map_atomic(s):
        return None
    out: dict[str, Any] = {}
    for key, val in value.items():
        pe = PathElement.field(key)
        if pe in to_remove.members:
            continue
        sub = to_remove.children.get(pe)
        if sub is not None and not sub.empty():
            child = _child_schema(s, key)
            out[key] = remove_items(val, sub, None if child is _UNDECLARED else child)
        else:
            out[key] = val
    return out if out else None


def ensure_named_fields_are_members(fs: FieldSet, s: Schema | None) -> FieldSet:
    """``Set.EnsureNamedFieldsAreMembers``: a declared struct field with owned children is owned too."""
    members = set(fs.members)
    children: dict[PathElement, FieldSet] = {}
    for pe, child in fs.children.items():
        if pe.kind == "f":
            if _is_declared(s, pe.payload):
                members.add(pe)
            sub = _child_schema(s, pe.payload)
            children[pe] = ensure_named_fields_are_members(child, None if sub is _UNDECLARED else sub)
        else:
            children[pe] = ensure_named_fields_are_members(child, _items(s))
    return FieldSet(members, children)


# ================================================================================================
# managers and managedFields entries
# ================================================================================================


@dataclass(frozen=True)
class Manager:
    """A manager's identity (``BuildManagerIdentifier``): apiVersion only counts for Update entries."""

    manager: str
    operation: str
    api_version: str = ""
    subresource: str = ""

    def identifier(self) -> str:
        """The JSON kube uses as the manager's key (and sorts conflict messages by)."""
        parts = [f'"manager":{go_json(self.manager)}', f'"operation":{go_json(self.operation)}']
        if self.api_version:
            parts.append(f'"apiVersion":{go_json(self.api_version)}')
        if self.subresource:
            parts.append(f'"subresource":{go_json(self.subresource)}')
        return "{" + ",".join(parts) + "}"

    def describe(self) -> str:
        """``printManager``: ``"name"``, ``"name" with subresource "status"``, ``… using v1``."""
        text = go_quote(self.manager)
        if self.subresource:
            text += f" with subresource {go_quote(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text


@dataclass
class VersionedSet:
    fields: FieldSet
    api_version: str
    applied: bool


@dataclass
class Managed:
    """Decoded managedFields: each manager's set and the time of its last change."""

    sets: dict[Manager, VersionedSet] = field(default_factory=dict)
    times: dict[Manager, str | None] = field(default_factory=dict)

    def copy(self) -> Managed:
        return Managed(
            {m: VersionedSet(vs.fields.copy(), vs.api_version, vs.applied) for m, vs in self.sets.items()},
            dict(self.times),
        )


class ManagedFieldsError(ValueError):
    """managedFields that kube's ``DecodeManagedFields`` refuses."""


def decode_managed_fields(entries: Any) -> Managed:
    """``DecodeManagedFields``."""
    out = Managed()
    if entries is None:
        return out
    if not isinstance(entries, list):
        raise ManagedFieldsError("managedFields must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ManagedFieldsError(f"managed fields entry {i} must be an object")
        operation = entry.get("operation")
        if operation not in ("Apply", "Update"):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion") or ""
        if not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType") or ""
        if fields_type == "":
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {i}")
        if fields_type != "FieldsV1":
            raise ManagedFieldsError(
                f"invalid fieldsType {go_quote(str(fields_type))} in managed fields entry {i}"
            )
        try:
            fs = FieldSet.from_json(entry.get("fieldsV1") or {})
        except (ValueError, TypeError) as exc:
            raise ManagedFieldsError(f"error decoding set: {exc}") from exc
        key = Manager(
            str(entry.get("manager") or ""),
            operation,
            "" if operation == "Apply" else api_version,
            str(entry.get("subresource") or ""),
        )
        out.sets[key] = VersionedSet(fs, api_version, operation == "Apply")
        out.times[key] = entry.get("time")
    return out


def _epoch(moment: str | None) -> int:
    if not moment:
        return 0
    try:
        return int(datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def encode_managed_fields(managed: Managed) -> list[dict[str, Any]] | None:
    """``encodeManagedFields``: one entry per manager, sorted as kube sorts them."""
    if not managed.sets:
        return None
    entries: list[dict[str, Any]] = []
    for key, vs in managed.sets.items():
        entry: dict[str, Any] = {
            "manager": key.manager,
            "operation": "Apply" if vs.applied else "Update",
            "apiVersion": vs.api_version,
        }
        moment = managed.times.get(key)
        if moment:
            entry["time"] = moment
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = vs.fields.to_json()
        if key.subresource:
            entry["subresource"] = key.subresource
        entries.append(entry)
    entries.sort(
        key=lambda e: (
            e["operation"],
            _epoch(e.get("time")),
            e["manager"],
            e["apiVersion"],
            e.get("subresource", ""),
        )
    )
    return entries


def is_reset(entries: Any) -> bool:
    """``isResetManagedFields``: ``[]`` or ``[{}]`` asks kube to drop all managedFields."""
    if not isinstance(entries, list):
        return False
    return len(entries) == 0 or (len(entries) == 1 and entries[0] == {})


def manager_from_user_agent(user_agent: str) -> str:
    """``prefixFromUserAgent``: the User-Agent up to the first ``/``, printable, at most 128 bytes."""
    out: list[str] = []
    size = 0
    for ch in user_agent.split("/", maxsplit=1)[0]:
        if not _is_print(ch):
            continue
        width = len(ch.encode("utf-8"))
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
        size += width
    return "".join(out)


def _is_print(ch: str) -> bool:
    """Go's ``unicode.IsPrint``: letters, marks, numbers, punctuation, symbols and ASCII space."""
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def field_manager_errors(name: str | None) -> list[FieldError]:
    """``ValidateFieldManager`` (at most 128 bytes, printable characters only)."""
    if not name:
        return []
    out: list[FieldError] = []
    if len(name.encode("utf-8")) > FIELD_MANAGER_MAX_LENGTH:
        out.append(
            FieldError(
                "fieldManager",
                fe.TOO_LONG,
                name,
                f"may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
            )
        )
    offset = 0
    for ch in name:
        if not _is_print(ch):
            out.append(
                FieldError(
                    "fieldManager",
                    fe.INVALID,
                    name,
                    f"invalid character U+{ord(ch):04X} (at position {offset})",
                )
            )
        offset += len(ch.encode("utf-8"))
    return out


# ================================================================================================
# the structured-merge-diff Updater (Update, Apply, prune, conflicts)
# ================================================================================================


@dataclass(frozen=True)
class Conflict:
    manager: Manager
    path: Path


class ConflictsError(Exception):
    """``merge.Conflicts``."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


def conflict_error(conflicts: list[Conflict]) -> ApiError:
    """``NewConflictError``: 409 with one ``FieldManagerConflict`` cause per conflicting field."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {c.manager.describe()}",
            "field": path_string(c.path),
        }
        for c in conflicts
    ]
    if len(conflicts) == 1:
        c = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {c.manager.describe()}: {path_string(c.path)}"
    else:
        by_manager: dict[Manager, list[Path]] = {}
        for c in conflicts:
            by_manager.setdefault(c.manager, []).append(c.path)
        lines: list[str] = []
        for m in sorted(by_manager, key=lambda m: m.identifier()):
            lines.append(f"conflicts with {m.describe()}:")
            lines.extend(f"- {path_string(p)}" for p in by_manager[m])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, details={"causes": causes})


@dataclass
class TypedContext:
    """How one write's objects are typed: the schema, the request version, the ignored fields."""

    schema: Schema | None
    version: str
    ignored: FieldSet | None
    zero_structs: bool

    def compare(self, lhs: Any, rhs: Any) -> Comparison:
        return compare(lhs, rhs, self.schema, zero_structs=self.zero_structs)


def _smd_update(
    ctx: TypedContext, live: Any, new: Any, managed: Managed, workflow: Manager | None, force: bool
) -> Comparison:
    """``Updater.update``: take changed fields away from every manager but ``workflow``."""
    cmp = ctx.compare(live, new)
    excluded = cmp.exclude(ctx.ignored)
    changed = excluded.modified.union(excluded.added)
    conflicts: dict[Manager, FieldSet] = {}
    for key, vs in managed.sets.items():
        if key == workflow:
            continue
        clash = vs.fields.intersection(changed)
        if not clash.empty():
            conflicts[key] = clash
    if conflicts and not force:
        found = [
            Conflict(key, p)
            for key in sorted(conflicts, key=lambda m: m.identifier())
            for p in conflicts[key].paths()
        ]
        raise ConflictsError(found)
    for key, vs in list(managed.sets.items()):
        if key == workflow:
            continue
        fields = vs.fields
        if key in conflicts:
            fields = fields.difference(conflicts[key])
        if not excluded.removed.empty():
            fields = fields.difference(excluded.removed)
        if fields.empty():
            del managed.sets[key]
        else:
            managed.sets[key] = VersionedSet(fields, vs.api_version, vs.applied)
    return cmp


def record_update(
    ctx: TypedContext, live: Any, new: Any, managed: Managed, manager: Manager, now: str
) -> None:
    """One non-apply write, as the field manager's wrappers record it.

    ``Updater.Update`` with a stand-in manager, the StripMeta filter, then (when the write changed
    anything the manager now owns) a merge into the manager's entry with a fresh time
    (``managedFieldsUpdater``).
    """
    cmp = _smd_update(ctx, live, new, managed, None, True)
    current = cmp.modified.union(cmp.added).difference(cmp.removed)
    if ctx.ignored is not None:
        current = current.recursive_difference(ctx.ignored)
    current = current.difference(STRIPPED)
    if current.empty():
        return
    previous = managed.sets.get(manager)
    fields = current.union(previous.fields) if previous is not None else current
    managed.sets[manager] = VersionedSet(fields, ctx.version, False)
    managed.times[manager] = now


def cap_update_managers(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> None:
    """``capManagersManager``: merge the oldest Update entries into ``ancient-changes`` buckets."""
    updaters = [m for m, vs in managed.sets.items() if not vs.applied]
    if len(updaters) <= limit:
        return
    updaters.sort(key=lambda m: (_epoch(managed.times.get(m)), m.identifier()))
    first_of_version: dict[str, Manager] = {}
    length = len(updaters)
    for m in updaters:
        if length <= limit:
            break
        vs = managed.sets[m]
        moment = managed.times.get(m)
        bucket = Manager("ancient-changes", "Update", vs.api_version)
        if vs.api_version in first_of_version:
            if bucket not in managed.sets:
                first = first_of_version[vs.api_version]
                managed.sets[bucket] = managed.sets.pop(first)
            merged = vs.fields.union(managed.sets[bucket].fields)
            managed.sets[bucket] = VersionedSet(merged, vs.api_version, vs.applied)
            del managed.sets[m]
            length -= 1
            managed.times[bucket] = moment
        else:
            first_of_version[vs.api_version] = m


def _smd_apply(
    ctx: TypedContext, live: Any, config: Obj, managed: Managed, manager: Manager, force: bool
) -> Any:
    """``Updater.Apply``: merge, prune what the manager stopped applying, check conflicts.

    Returns the new object, or :data:`ABSENT` when applying changed nothing.
    """
    schema = ctx.schema
    new = merge(live, config, schema)
    last = managed.sets.get(manager)
    fields = to_field_set(config, schema)
    if ctx.ignored is not None:
        fields = fields.recursive_difference(ctx.ignored)
    managed.sets[manager] = VersionedSet(fields, ctx.version, True)
    if last is not None and not last.fields.empty():
        new = _prune(new, managed, last.fields, schema)
    _smd_update(ctx, live, new, managed, manager, force)
    if value_equal(live, new):
        return ABSENT
    return new


def _prune(merged: Any, managed: Managed, last: FieldSet, schema: Schema | None) -> Any:
    """``Updater.prune`` with ``addBackOwnedItems`` and ``addBackDanglingItems``."""
    enf = functools.partial(ensure_named_fields_are_members, s=schema)
    pruned = remove_items(merged, enf(last), schema)
    owned = FieldSet()
    for vs in managed.sets.values():
        owned = owned.union(vs.fields)
    merged_set = enf(to_field_set(merged, schema))
    pruned_set = enf(to_field_set(pruned, schema))
    pruned = remove_items(merged, merged_set.difference(pruned_set.union(enf(owned))), schema)
    pruned_set = enf(to_field_set(pruned, schema))
    return remove_items(merged, merged_set.difference(pruned_set).intersection(enf(last)), schema)


# ================================================================================================
# FieldManager.Apply and FieldManager.Update on resources
# ================================================================================================


def typed_context(rt: ResourceType, subresource: str | None) -> TypedContext:
    """The typing of writes to ``rt`` (``subresource`` ``status`` or the main resource)."""
    ignored: FieldSet | None = None
    if subresource == "status":
        paths: list[Path] = [(PathElement.field("spec"),)]
        if not rt.is_custom:
            paths += [
                (PathElement.field("metadata"), PathElement.field("labels")),
                (PathElement.field("metadata"), PathElement.field("annotations")),
            ]
        ignored = FieldSet.of(*paths)
    elif "status" in rt.subresources:
        ignored = FieldSet.of((PathElement.field("status"),))
    return TypedContext(resource_schema(rt), rt.api_version, ignored, zero_structs=not rt.is_custom)


def _gvk_string(api_version: Any, kind: Any) -> str:
    """``schema.GroupVersionKind.String()`` of an object's apiVersion and kind."""
    av = api_version if isinstance(api_version, str) else ""
    kd = kind if isinstance(kind, str) else ""
    parts = av.split("/")
    if av == "":
        group, version = "", ""
    elif len(parts) == 1:
        group, version = "", parts[0]
    elif len(parts) == 2:
        group, version = parts
    else:
        group, version = "", ""
    return f"{group}/{version}, Kind={kd}"


def _object_gvknn(obj: Obj) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    return f"{ns}/{name}; {_gvk_string(obj.get('apiVersion'), obj.get('kind'))}"


class UnknownReasonError(ApiError):
    """An error kube answers with a bare 500: a plain Go error, no ``reason`` in the Status."""

    def __init__(self, message: str) -> None:
        super().__init__(500, "", message)

    def status(self) -> dict[str, Any]:
        body = super().status()
        body.pop("reason", None)
        return body


def _without_managed(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (a shallow copy: callers must not mutate it)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@dataclass
class ApplyResult:
    """What :func:`apply` produced: the object to store and its managedFields."""

    obj: Obj
    managed_fields: list[dict[str, Any]] | None
    changed: bool


def apply(
    rt: ResourceType,
    live: Obj | None,
    config: Obj,
    manager: str,
    *,
    force: bool,
    subresource: str | None = None,
    now: str,
) -> ApplyResult:
    """``FieldManager.Apply`` with kube's default wrappers, for a live object (``None`` to create)."""
    expected = _gvk_string(rt.api_version, rt.kind)
    got = _gvk_string(config.get("apiVersion"), config.get("kind"))
    if got != expected:
        raise errors.bad_request(f"invalid object type: {got}")
    meta = config.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("managedFields"), list):
        raise errors.bad_request("metadata.managedFields must be nil")
    ctx = typed_context(rt, subresource)
    problems = validate(config, ctx.schema)
    if problems:
        text = problems[0] if len(problems) == 1 else "errors:\n" + "\n".join("  " + p for p in problems)
        raise UnknownReasonError(f"failed to create typed patch object ({_object_gvknn(config)}): {text}")
    base: Obj = copy.deepcopy(_without_managed(live)) if live is not None else {}
    try:
        managed = decode_managed_fields((live or {}).get("metadata", {}).get("managedFields"))
    except ManagedFieldsError as exc:
        raise UnknownReasonError(f"failed to decode managed fields: {exc}") from exc
    key = Manager(manager, "Apply", "", subresource or "")
    try:
        result, out = _apply_once(ctx, base, config, managed.copy(), key, force, subresource, now)
    except ConflictsError as exc:
        allowed = _allowed_conflicts(ctx, base, manager) if manager == "kubectl" else None
        remaining = [c for c in exc.conflicts if allowed is None or not allowed.has(c.path)]
        if allowed is None or remaining:
            raise conflict_error(remaining or exc.conflicts) from exc
        result, out = _apply_once(ctx, base, config, managed.copy(), key, True, subresource, now)
    changed = result is not ABSENT
    obj = result if changed else copy.deepcopy(base)
    assert isinstance(obj, dict)
    if manager == "kubectl" and _has_last_applied(obj):
        obj.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = _last_applied(
            config
        )
    return ApplyResult(obj, encode_managed_fields(out), changed)


def _apply_once(
    ctx: TypedContext,
    live: Obj,
    config: Obj,
    managed: Managed,
    key: Manager,
    force: bool,
    subresource: str | None,
    now: str,
) -> tuple[Any, Managed]:
    if not managed.sets:
        # skipNonAppliedManager: fields set before the first apply belong to "before-first-apply".
        before = Manager("before-first-apply", "Update", ctx.version, subresource or "")
        record_update(ctx, {}, live, managed, before, now)
    result = _smd_apply(ctx, live, config, managed, key, force)
    vs = managed.sets.get(key)
    if vs is not None:
        stripped = vs.fields.difference(STRIPPED)
        if stripped.empty():
            del managed.sets[key]
        else:
            managed.sets[key] = VersionedSet(stripped, vs.api_version, vs.applied)
    if result is not ABSENT:
        managed.times[key] = now
    return result, managed


def _allowed_conflicts(ctx: TypedContext, live: Obj, manager: str) -> FieldSet | None:
    """``lastAppliedManager``: fields ``kubectl`` may take over from client-side apply."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LAST_APPLIED_ANNOTATION) if isinstance(annotations, dict) else None
    if not text:
        return None
    try:
        last = json.loads(text)
    except ValueError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != ctx.version:
        return None
    if validate(last, ctx.schema):
        return None
    fields = to_field_set(last, ctx.schema)
    cmp = compare(last, live, ctx.schema, zero_structs=ctx.zero_structs)
    return fields.difference(cmp.modified).difference(cmp.added).difference(cmp.removed)


def _has_last_applied(obj: Obj) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and bool(annotations.get(LAST_APPLIED_ANNOTATION))


def _last_applied(config: Obj) -> str:
    """``buildLastApplied``: the applied configuration without the annotation, as kubectl encodes it."""
    obj = copy.deepcopy(config)
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta["annotations"].pop(LAST_APPLIED_ANNOTATION, None)
    return go_json(obj) + "\n"


def update_managed_fields(
    rt: ResourceType,
    old: Obj | None,
    new: Obj,
    manager: str,
    *,
    subresource: str | None,
    now: str,
) -> None:
    """``FieldManager.UpdateNoErrors`` on a create (``old`` is ``None``) or update, in place on ``new``."""
    meta = new.setdefault("metadata", {})
    old_entries = (old or {}).get("metadata", {}).get("managedFields")
    requested = meta.get("managedFields")
    if subresource:
        managed = _decode_or_empty(old_entries)
    elif is_reset(requested):
        managed = Managed()
    else:
        try:
            managed = decode_managed_fields(requested)
        except ManagedFieldsError:
            managed = Managed()
        if not managed.sets:
            managed = _decode_or_empty(old_entries)
    meta.pop("managedFields", None)
    if not managed.sets and old is not None:
        return  # skipNonAppliedManager: objects without managedFields stay untracked until applied
    ctx = typed_context(rt, subresource)
    live = _without_managed(old) if old is not None else {}
    record_update(
        ctx,
        live,
        _without_managed(new),
        managed,
        Manager(manager or "unknown", "Update", ctx.version, subresource or ""),
        now,
    )
    cap_update_managers(managed)
    entries = encode_managed_fields(managed)
    if entries:
        meta["managedFields"] = entries


def _decode_or_empty(entries: Any) -> Managed:
    try:
        return decode_managed_fields(entries)
    except ManagedFieldsError:
        return Managed()


@dataclass
class ManagedOptions(WriteOptions):
    """Write options carrying what the PATCH handler knows: the subresource and, for apply, the result."""

    subresource: str | None = None
    #: Set for server-side apply: the managedFields :func:`apply` computed, stored as they are.
    applied_fields: list[dict[str, Any]] | None = None
    apply: bool = False

    @classmethod
    def of(cls, opts: WriteOptions, **extra: Any) -> ManagedOptions:
        """``opts`` (every :class:`WriteOptions` field) plus ``extra``."""
        return cls(**{f.name: getattr(opts, f.name) for f in dataclass_fields(WriteOptions)}, **extra)


class FieldManager:
    """``Api.managed_fields_hook``: records ``Update`` entries, stores what apply computed."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def __call__(
        self, rt: ResourceType, old: Obj | None, new: Obj, opts: WriteOptions, operation: str
    ) -> None:
        if isinstance(opts, ManagedOptions) and opts.apply:
            meta = new.setdefault("metadata", {})
            if opts.applied_fields:
                meta["managedFields"] = copy.deepcopy(opts.applied_fields)
            else:
                meta.pop("managedFields", None)
            return
        if operation == "Apply":
            return
        subresource = (
            opts.subresource if isinstance(opts, ManagedOptions) else _infer_subresource(rt, old, new)
        )
        manager = opts.field_manager or manager_from_user_agent(REQUEST_USER_AGENT.get())
        update_managed_fields(rt, old, new, manager, subresource=subresource, now=rfc3339(self.api.clock()))


def _infer_subresource(rt: ResourceType, old: Obj | None, new: Obj) -> str | None:
    """A write that changed only ``status`` of a kind with a status subresource came through /status.

    (The main resource cannot change status there, and /status keeps everything else as stored.)
    """
    if old is None or "status" not in rt.subresources:
        return None
    if old.get("status") == new.get("status"):
        return None
    rest_old = {k: v for k, v in old.items() if k not in ("status", "apiVersion")}
    rest_new = {k: v for k, v in new.items() if k not in ("status", "apiVersion")}
    return "status" if rest_old == rest_new else None


def install(api: Api) -> None:
    """Make ``api`` maintain managedFields on every create and update."""
    api.managed_fields_hook = FieldManager(api)
