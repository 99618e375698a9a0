"""Label and field selectors, and paginated LIST, the way kube-apiserver implements them.

* Label selectors follow ``k8s.io/apimachinery/pkg/labels`` (lexer, parser, key and value validation,
  error texts): equality (``=``, ``==``, ``!=``), set-based (``in``, ``notin``), existence (``key``,
  ``!key``) and the numeric ``>``/``<`` kube also accepts. The parser and matcher are the runtime's
  (:mod:`aiplane.apimachinery.selectors`); this module turns a syntax error into kube-apiserver's 400.
* Field selectors follow ``k8s.io/apimachinery/pkg/fields`` (``=``, ``==``, ``!=``, backslash escapes) and
  each kind's field label conversion (``pkg/apis/*/v1/conversion.go``) and selectable fields
  (``ToSelectableFields`` in the registry strategies): which labels a kind accepts, the error for the
  others, and what value an object has for each label.
* LIST pages through the objects in etcd key order (``namespace/name``) with kube's continue tokens
  (base64url of ``{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\\u0000"}``). A continued page is served
  from the snapshot at the token's resourceVersion, rebuilt from the store's per-resource event
  history; when that history no longer reaches back (etcd's compaction), the answer is kube's 410.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.selectors import Selector, SelectorError, parse_selector
from aiplane.apimachinery.values import go_quote
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.store import ADDED, Store

Predicate = Callable[[dict[str, Any]], bool]
Obj = dict[str, Any]

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"

# --- label selectors (labels.Parse: aiplane.apimachinery.selectors) ----------------------------------------------


class LabelSelector(Selector):
    """A parsed ``labelSelector`` query parameter; call it with an object to match the object's labels."""

    __slots__ = ()

    def __call__(self, obj: Obj) -> bool:
        if self.empty:
            return True
        return self.matches(obj.get("metadata", {}).get("labels") or {})


def label_selector(text: str | None) -> LabelSelector:
    """The predicate of a ``labelSelector`` query parameter: ``labels.Parse``, whose syntax error is a
    400 BadRequest with kube's message."""
    if not text:
        return LabelSelector()
    try:
        parsed = parse_selector(text)
    except SelectorError as exc:
        raise errors.bad_request(exc.reason) from None
    return LabelSelector(parsed.requirements)


# --- field selectors (fields/selector.go and the per-kind conversions) ---------------------------------

Getter = Callable[[Obj], str]


class _ParseError(Exception):
    """A field selector ``fields.ParseSelector`` refuses (kube's message)."""


def _scalar(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return default


def _at(*path: str, default: str = "") -> Getter:
    def get(obj: Obj) -> str:
        cur: Any = obj
        for key in path:
            if not isinstance(cur, dict):
                return default
            cur = cur.get(key)
        return _scalar(cur, default)

    return get


def _pod_ip(obj: Obj) -> str:
    status = obj.get("status") or {}
    ips = status.get("podIPs") or []
    if ips and isinstance(ips[0], dict):
        return str(ips[0].get("ip", ""))
    return str(status.get("podIP") or "")


def _event_source(obj: Obj) -> str:
    return _at("source", "component")(obj) or _at("reportingComponent")(obj)


def _events_v1_source(obj: Obj) -> str:
    return _at("deprecatedSource", "component")(obj) or _at("reportingController")(obj)


def _not_supported(label: str) -> str:
    return f"field label not supported: {label}"


def _not_known(label: str) -> str:
    return f'{go_quote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"'


@dataclass(frozen=True)
class FieldRules:
    """One kind's field label conversion: accepted labels (to canonical ones), values, rejection text."""

    accepted: Mapping[str, str]
    values: Mapping[str, Getter]
    reject: Callable[[str], str] = _not_supported


_NAME: dict[str, Getter] = {"metadata.name": _at("metadata", "name")}
_NS: dict[str, Getter] = {"metadata.namespace": _at("metadata", "namespace")}
_META = {**_NAME, **_NS}


def _rules(
    labels: Mapping[str, Getter], *, aliases: Mapping[str, str] | None = None, **kw: Any
) -> FieldRules:
    accepted = {label: label for label in labels}
    accepted.update(aliases or {})
    return FieldRules(accepted, dict(labels), **kw)


_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

#: Kinds with their own field label conversion (``pkg/apis/core/v1/conversion.go`` and friends).
_BUILTIN_RULES: dict[tuple[str, str], FieldRules] = {
    ("", "pods"): _rules(
        {
            **_META,
            "spec.nodeName": _at("spec", "nodeName"),
            "spec.restartPolicy": _at("spec", "restartPolicy"),
            "spec.schedulerName": _at("spec", "schedulerName"),
            "spec.serviceAccountName": _at("spec", "serviceAccountName"),
            "spec.hostNetwork": _at("spec", "hostNetwork", default="false"),
            "status.phase": _at("status", "phase"),
            "status.podIP": _pod_ip,
            # Accepted by the conversion, never set by ToSelectableFields: always "".
            "status.podIPs": lambda obj: "",
            "status.nominatedNodeName": _at("status", "nominatedNodeName"),
        },
        aliases={"spec.host": "spec.nodeName"},
    ),
    ("", "nodes"): _rules({**_NAME, "spec.unschedulable": _at("spec", "unschedulable", default="false")}),
    ("", "namespaces"): _rules({**_NAME, "status.phase": _at("status", "phase")}),
    ("", "secrets"): _rules({**_META, "type": _at("type", default="Opaque")}),
    ("", "services"): _rules(
        {
            **_META,
            "spec.clusterIP": _at("spec", "clusterIP"),
            "spec.type": _at("spec", "type", default="ClusterIP"),
        }
    ),
    ("", "events"): _rules(
        {
            **_META,
            **{f"involvedObject.{k}": _at("involvedObject", k) for k in _INVOLVED},
            "reason": _at("reason"),
            "reportingComponent": _at("reportingComponent"),
            "source": _event_source,
            "type": _at("type"),
        }
    ),
    # events.k8s.io/v1 shares the core Event's labels, spelled the v1 way (regarding.*, reportingController).
    ("events.k8s.io", "events"): FieldRules(
        accepted={
            "metadata.name": "metadata.name",
            "metadata.namespace": "metadata.namespace",
            "reason": "reason",
            "type": "type",
            "reportingController": "reportingComponent",
            **{f"regarding.{k}": f"involvedObject.{k}" for k in _INVOLVED},
        },
        values={
            **_META,
            **{f"involvedObject.{k}": _at("regarding", k) for k in _INVOLVED},
            "reason": _at("reason"),
            "reportingComponent": _at("reportingController"),
            "source": _events_v1_source,
            "type": _at("type"),
        },
    ),
    ("batch", "jobs"): _rules(
        {**_META, "status.successful": _at("status", "succeeded", default="0")},
        reject=lambda label: f"field label {go_quote(label)} not supported for Job",
    ),
}

#: ``runtime.DefaultMetaV1FieldSelectorConversion``: every kind without its own conversion.
_DEFAULT_RULES = _rules(_META, reject=_not_known)


def _crd_rules(rt: ResourceType, store: Store | None) -> FieldRules:
    """The CR converter: metadata.name, metadata.namespace when namespaced, and the CRD's selectableFields."""
    labels: dict[str, Getter] = dict(_META if rt.namespaced else _NAME)
    crd = store.get(CRD_KEY, "", rt.crd_name or "") if store is not None else None
    if crd is not None:
        for version in crd.get("spec", {}).get("versions", []):
            if version.get("name") != rt.version:
                continue
            for selectable in version.get("selectableFields") or []:
                path = str(selectable.get("jsonPath", "")).lstrip(".")
                if path:
                    labels[path] = _at(*path.split("."))
    return _rules(labels)


def field_rules(rt: ResourceType, store: Store | None = None) -> FieldRules:
    if rt.is_custom:
        return _crd_rules(rt, store)
    return _BUILTIN_RULES.get((rt.group, rt.plural), _DEFAULT_RULES)


def _split_terms(text: str) -> list[str]:
    """``fields.splitTerms``: commas split terms unless escaped (the backslash stays)."""
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    """``fields.UnescapeValue``."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch not in "\\,=":
                raise _ParseError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise _ParseError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise _ParseError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@dataclass(frozen=True)
class FieldTerm:
    label: str  # canonical
    equal: bool
    value: str


@dataclass(frozen=True)
class FieldSelector:
    """A parsed and converted field selector; call it with an object."""

    terms: tuple[FieldTerm, ...] = ()
    getters: Mapping[str, Getter] = field(default_factory=dict, compare=False)

    @property
    def empty(self) -> bool:
        return not self.terms

    def exact(self, label: str) -> str | None:
        """``RequiresExactMatch``: the value an ``=`` term requires for ``label``."""
        for term in self.terms:
            if term.label == label and term.equal:
                return term.value
        return None

    def __call__(self, obj: Obj) -> bool:
        for term in self.terms:
            getter = self.getters.get(term.label)
            have = getter(obj) if getter is not None else ""
            if (have == term.value) != term.equal:
                return False
        return True


def parse_field_selector(rt: ResourceType, text: str | None, *, store: Store | None = None) -> FieldSelector:
    """``fields.ParseSelector`` then the kind's field label conversion; errors are 400 BadRequest."""
    if not text:
        return FieldSelector()
    terms: list[FieldTerm] = []
    try:
        parts = sorted(_split_terms(text))
        parsed: list[tuple[str, str, str]] = []
        for part in parts:
            if not part:
                continue
            split = _split_term(part)
            if split is None:
                raise _ParseError(f"invalid selector: '{text}'; can't understand '{part}'")
            lhs, op, rhs = split
            parsed.append((lhs, op, _unescape(rhs)))
    except _ParseError as exc:
        raise errors.bad_request(str(exc)) from None
    rules = field_rules(rt, store)
    for lhs, op, value in parsed:
        canonical = rules.accepted.get(lhs)
        if canonical is None:
            raise errors.bad_request(rules.reject(lhs))
        terms.append(FieldTerm(canonical, op != "!=", value))
    return FieldSelector(tuple(terms), rules.values)


def field_selector(rt: ResourceType, text: str | None, *, store: Store | None = None) -> FieldSelector:
    """The predicate of a ``fieldSelector`` query parameter (400 BadRequest if kube would refuse it).

    ``store`` lets a custom resource use its CRD's ``selectableFields``.
    """
    return parse_field_selector(rt, text, store=store)


# --- resourceVersion, list options and continue tokens -------------------------------------------------


class StatusError(ApiError):
    """An :class:`ApiError` whose Status carries list metadata (a 410's fresh continue token)."""

    def __init__(
        self, code: int, reason: str, message: str, *, meta: dict[str, Any] | None = None, **kw: Any
    ):
        super().__init__(code, reason, message, **kw)
        self.meta = meta or {}

    def status(self) -> dict[str, Any]:
        body = super().status()
        body["metadata"] = dict(self.meta)
        if not self.reason:
            body.pop("reason", None)
        return body


EXPIRED_LIST = "The resourceVersion for the provided list is too old."
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - "
    "objects that were created, modified, or deleted between the time the first chunk was returned and "
    "now may show up in the list."
)


def too_large(requested: int, current: int) -> ApiError:
    """``storage.NewTooLargeResourceVersionError``: a 504 the client retries after a second."""
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details={
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
        headers={"Retry-After": "1"},
    )


class InvalidResourceVersionError(Exception):
    """``APIObjectVersioner.ParseResourceVersion`` failed (a storage ``InvalidError``)."""

    def __init__(self, text: str) -> None:
        super().__init__(
            FieldError(
                "resourceVersion",
                fe.INVALID,
                text,
                f"strconv.ParseUint: parsing {go_quote(text)}: invalid syntax",
            ).render_kube()
        )


def parse_rv(text: str | None) -> int:
    if not text or text == "0":
        return 0
    if not text.isdigit() or not text.isascii() or int(text) >= 2**64:
        raise InvalidResourceVersionError(text)
    return int(text)


def storage_invalid(exc: InvalidResourceVersionError) -> ApiError:
    """A storage error the handler does not translate: kube answers 500 with the error's text."""
    return StatusError(500, "", str(exc))


def encode_continue(start: str, rv: int) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _clean(path: str) -> str:
    """Go's ``path.Clean`` for the absolute paths continue keys become."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)


def decode_continue(token: str) -> tuple[str, int]:
    """``storage.DecodeContinue``: the start key (relative to the list's prefix) and the snapshot rv."""
    invalid = "continue key is not valid"
    # Go's base64.RawURLEncoding: only the URL alphabet, no padding (Python's decoder is lenient).
    bad = next((i for i, c in enumerate(token) if not (c.isascii() and (c.isalnum() or c in "-_"))), None)
    if bad is None and len(token) % 4 == 1:
        bad = len(token) - 1
    try:
        if bad is not None:
            raise ValueError("not base64url")
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise errors.bad_request(
            f"invalid continue token: {invalid}: illegal base64 data at input byte {bad or 0}"
        ) from None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise errors.bad_request(f"invalid continue token: {invalid}: {exc}") from None
    if not isinstance(decoded, dict):
        raise errors.bad_request(f"invalid continue token: {invalid}: not an object")
    version = decoded.get("v", "")
    rv = decoded.get("rv", 0)
    start = decoded.get("start", "")
    if version != "meta.k8s.io/v1":
        raise errors.bad_request(
            f"invalid continue token: {invalid}: server does not recognize this encoded version {version}"
        )
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise errors.bad_request(
            f"invalid continue token: {invalid}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        )
    if not isinstance(start, str) or not start:
        raise errors.bad_request(
            f"invalid continue token: {invalid}: encoded start key empty (version meta.k8s.io/v1)"
        )
    key = start if start.startswith("/") else "/" + start
    if _clean(key) != key:
        raise errors.bad_request(f"invalid continue token: {invalid}: {start}")
    return key[1:], rv


def _forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, fe.FORBIDDEN, None, detail)


def _not_supported_value(path: str, value: str, supported: list[str]) -> FieldError:
    return FieldError(
        path, fe.NOT_SUPPORTED, value, "supported values: " + ", ".join(go_quote(s) for s in supported)
    )


def validate_list_options(query: Mapping[str, str], *, watch: bool) -> None:
    """``ValidateListOptions`` (422 Invalid ``ListOptions.meta.k8s.io``)."""
    errs: list[FieldError] = []
    match = query.get("resourceVersionMatch", "")
    rv = query.get("resourceVersion", "")
    cont = query.get("continue", "")
    send_initial = "sendInitialEvents" in query
    if watch:
        if send_initial and match != "NotOlderThan":
            errs.append(
                _forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if match:
            if not send_initial:
                errs.append(
                    _forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    )
                )
            if match != "NotOlderThan":
                errs.append(_not_supported_value("resourceVersionMatch", match, ["NotOlderThan"]))
            if cont:
                errs.append(
                    _forbidden(
                        "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                    )
                )
    else:
        if match:
            if not rv:
                errs.append(
                    _forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )
                )
            if cont:
                errs.append(
                    _forbidden(
                        "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                    )
                )
            if match not in ("Exact", "NotOlderThan"):
                errs.append(
                    _not_supported_value("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""])
                )
            if match == "Exact" and rv == "0":
                errs.append(
                    _forbidden(
                        "resourceVersionMatch",
                        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    )
                )
        if send_initial:
            errs.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if errs:
        raise errors.invalid("ListOptions", "meta.k8s.io", "", errs)


# --- snapshots and LIST --------------------------------------------------------------------------------


def snapshot(store: Store, key: str, namespace: str | None, rv: int | None) -> list[Obj] | None:
    """The stored objects of ``key`` (in ``namespace``) as they were at ``rv`` (``None``: now).

    Rebuilt by undoing the resource's events after ``rv``; ``None`` when the history no longer reaches
    back that far (what etcd reports as a compacted revision).
    """
    current = store.items(key, namespace)
    if rv is None or rv >= store.rv:
        return current
    events = store.events_since(key, rv)
    if events is None:
        return None
    if not events:
        return current
    state = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in current}
    for event in reversed(events):
        meta = event.obj["metadata"]
        ident = (meta.get("namespace", ""), meta["name"])
        if namespace is not None and ident[0] != namespace:
            continue
        if event.type == ADDED or event.old is None:
            state.pop(ident, None)
        else:
            state[ident] = event.old
    return list(state.values())


def storage_key_of(obj: Obj, with_namespace: bool) -> str:
    """The object's etcd key below the list's prefix (``namespace/name`` or ``name``)."""
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}" if with_namespace else str(meta["name"])


def list_objects(
    api: Any,
    rt: ResourceType,
    namespace: str | None,
    *,
    label: str | None,
    field: str | None,
    limit: int | None,
    continue_token: str | None,
    query: Mapping[str, str] | None = None,
) -> tuple[list[Obj], str, str | None, int | None]:
    """LIST: ``(items, list resourceVersion, continue token or None, remainingItemCount or None)``.

    ``query`` carries the other list options (``resourceVersion``, ``resourceVersionMatch``,
    ``sendInitialEvents``) so they are validated and honoured as kube-apiserver does.
    """
    q: Mapping[str, str] = query if query is not None else {}
    validate_list_options(q, watch=False)
    store: Store = api.store
    lsel = label_selector(label)
    fsel = field_selector(rt, field, store=store)
    key = rt.storage_key
    ns = (namespace or None) if rt.namespaced else None
    with_ns = rt.namespaced and ns is None
    current = store.rv
    start, snap_rv = _list_start(q, limit, continue_token, current)
    if snap_rv is not None and snap_rv > current:
        raise too_large(snap_rv, current)
    objects = snapshot(store, key, ns, snap_rv)
    if objects is None:
        if start is not None:
            raise StatusError(410, "Expired", CONTINUE_EXPIRED, meta={"continue": encode_continue(start, -1)})
        raise StatusError(410, "Expired", EXPIRED_LIST)
    list_rv = snap_rv if snap_rv is not None else current
    # etcd's order: "ns/name" byte-wise (not by (ns, name): "a-b/x" < "a/x"); sorted() is linear on
    # the store's already ordered lists.
    entries = sorted(((storage_key_of(o, with_ns), o) for o in objects), key=lambda e: e[0])
    if start is not None:
        entries = [e for e in entries if e[0] >= start]
    everything = lsel.empty and fsel.empty
    out: list[Obj] = []
    last_key = ""
    has_more = False
    scanned = 0
    for k, obj in entries:
        scanned += 1
        if everything or (lsel(obj) and fsel(obj)):
            out.append(obj)
            last_key = k
        if limit and len(out) >= limit:
            has_more = scanned < len(entries)
            break
    cont: str | None = None
    remaining: int | None = None
    if has_more:
        cont = encode_continue(last_key + "\0", list_rv)
        if everything:
            remaining = len(entries) - scanned
    served = [api.served(rt, o) for o in out]
    return served, str(list_rv), cont, remaining


def _list_start(
    q: Mapping[str, str], limit: int | None, continue_token: str | None, current: int
) -> tuple[str | None, int | None]:
    """Where a LIST starts: the continue key (``None`` from the top) and the revision to read at
    (``None``: the current one), from the continue token or ``resourceVersion``/``…Match``."""
    rv_param = q.get("resourceVersion", "")
    if continue_token:
        if rv_param not in ("", "0"):
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        start, token_rv = decode_continue(continue_token)
        return start, token_rv if token_rv > 0 else None
    match = q.get("resourceVersionMatch", "")
    exact = match == "Exact" or (match == "" and bool(limit) and rv_param not in ("", "0"))
    try:
        wanted = parse_rv(rv_param)
    except InvalidResourceVersionError as exc:
        if exact:
            raise errors.bad_request(f"invalid resource version: {exc}") from None
        raise storage_invalid(exc) from None
    if wanted > current:
        raise too_large(wanted, current)
    return None, wanted if exact else None
