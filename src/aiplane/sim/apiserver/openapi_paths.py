"""The paths of an OpenAPI document: one operation per verb of each resource and subresource, with the
parameters, responses, operation ids and tags kube-apiserver's installer generates (see ``openapi.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiplane.sim.apiserver.openapi_schemas import (
    BINDING,
    DELETE_OPTIONS,
    EVICTION,
    PATCH,
    SCALE,
    STATUS,
    V2_PREFIX,
    V3_PREFIX,
)
from aiplane.sim.apiserver.resources import ResourceType

_QUERY = {
    "pretty": (
        "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a "
        "browser or command-line HTTP tool (curl and wget).",
    ),
    "dryRun": (
        "string",
        "When present, indicates that modifications should not be persisted. An invalid or unrecognized "
        "dryRun directive will result in an error response and no further processing of the request. Valid "
        "values are: - All: all dry run stages will be processed",
    ),
    "fieldManager": (
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The value "
        "must be less than or 128 characters long, and only contain printable characters, as defined by "
        "https://golang.org/pkg/unicode/#IsPrint.",
    ),
    "fieldValidation": (
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
        "containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown "
        "fields that are silently dropped from the object, and will ignore all but the last duplicate field "
        "that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a "
        "warning via the standard warning response header for each unknown field that is dropped from the "
        "object, and for each duplicate field that is encountered. The request will still succeed if there "
        "are no other errors, and will only persist the last of any duplicate fields. This is the default in "
        "v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be "
        "dropped from the object, or if any duplicate fields are present. The error returned from the server "
        "will contain all unknown and duplicate fields encountered.",
    ),
    "force": (
        "boolean",
        'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by '
        "other people. Force flag must be unset for non-apply patch requests.",
    ),
    "allowWatchBookmarks": (
        "boolean",
        'allowWatchBookmarks requests watch events with type "BOOKMARK". Servers that do not implement '
        "bookmarks may ignore this flag and bookmarks are sent at the server's discretion.",
    ),
    "continue": (
        "string",
        "The continue option should be set when retrieving more results from the server. Since this value is "
        "server defined, clients may only use the continue value from a previous query result with identical "
        "query parameters (except for the value of continue).",
    ),
    "fieldSelector": (
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    "labelSelector": (
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    "limit": (
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server "
        "will set the `continue` field on the list metadata to a value that can be used with the same initial "
        "query to retrieve the next set of results.",
    ),
    "resourceVersion": (
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "resourceVersionMatch": (
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "sendInitialEvents": (
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will "
        "begin with synthetic events to produce the current state of objects in the collection.",
    ),
    "timeoutSeconds": (
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or "
        "inactivity.",
    ),
    "watch": (
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove "
        "notifications. Specify resourceVersion.",
    ),
    "gracePeriodSeconds": (
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative integer. The "
        "value zero indicates delete immediately.",
    ),
    "ignoreStoreReadErrorWithClusterBreakingPotential": (
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow "
        "fails with a corrupt object error.",
    ),
    "orphanDependents": (
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the "
        "dependent objects be orphaned.",
    ),
    "propagationPolicy": (
        "string",
        "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be "
        "set, but not both. Acceptable values are: 'Orphan', 'Foreground' and 'Background'.",
    ),
}
_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = (
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
)
_OPERATION_VERBS = (
    "get",
    "log",
    "read",
    "replace",
    "patch",
    "delete",
    "watch",
    "connect",
    "proxy",
    "list",
    "create",
)
_BUILTIN_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_CRD_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)
_PRODUCES = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
)
_CRD_PRODUCES = ("application/json", "application/yaml", "application/cbor")


def _valid_operation_id(text: str, capitalize_first: bool) -> str:
    """kube-openapi's ``ToValidOperationID``: drop non-alphanumerics, capitalising what follows them."""
    out: list[str] = []
    upper = capitalize_first
    for ch in text:
        if ch.isalnum():
            out.append(ch.upper() if upper else ch)
            upper = False
        else:
            upper = True
    return "".join(out)


def operation_id_and_tag(operation: str, path: str) -> tuple[str, str]:
    """apiserver's ``GetOperationIDAndTags`` (``listNamespacedPod`` on /api/v1 -> ``listCoreV1NamespacedPod``)."""
    prefix = next(v for v in _OPERATION_VERBS if operation.startswith(v))
    rest = operation[len(prefix) :]
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"]:
        parts = ["apis", "core", *parts[1:]]
    trimmed = parts[1].removesuffix(".k8s.io")
    prefix += _valid_operation_id(trimmed, True)
    tag = _valid_operation_id(trimmed, False)
    if len(parts) > 2:
        prefix += _valid_operation_id(parts[2], True)
        tag += "_" + _valid_operation_id(parts[2], False)
    return prefix + _valid_operation_id(rest, True), tag


def _article(kind: str) -> str:
    return " an " if kind[:1].lower() in "aeiou" else " a "


@dataclass
class PathBuilder:
    """Accumulates the paths and schema names of one document."""

    v3: bool
    crd: bool
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    builtin_defs: set[str] = field(default_factory=set)
    custom_defs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return V3_PREFIX if self.v3 else V2_PREFIX

    def query(self, name: str) -> dict[str, Any]:
        kind, description = _QUERY[name]
        if self.v3:
            return {
                "name": name,
                "in": "query",
                "description": description,
                "schema": {"type": kind, "uniqueItems": True},
            }
        return {"uniqueItems": True, "type": kind, "description": description, "name": name, "in": "query"}

    def path_param(self, name: str, description: str) -> dict[str, Any]:
        if self.v3:
            return {
                "name": name,
                "in": "path",
                "description": description,
                "required": True,
                "schema": {"type": "string", "uniqueItems": True},
            }
        return {
            "uniqueItems": True,
            "type": "string",
            "description": description,
            "name": name,
            "in": "path",
            "required": True,
        }

    def operation(
        self,
        *,
        path: str,
        name: str,
        action: str,
        description: str,
        gvk: dict[str, str],
        response: str,
        params: Iterable[str] = (),
        request: str | None = None,
        request_types: Iterable[str] = ("*/*",),
        request_required: bool = True,
        extra_codes: Iterable[str] = (),
    ) -> dict[str, Any]:
        op_id, tag = operation_id_and_tag(name, path)
        produces = _CRD_PRODUCES if self.crd else _PRODUCES
        op: dict[str, Any] = {"tags": [tag], "description": description, "operationId": op_id}
        parameters = [self.query(p) for p in params]
        ref = {"$ref": self.prefix + response}
        codes = ["200", *extra_codes]
        if self.v3:
            if parameters:
                op["parameters"] = parameters
            if request is not None:
                op["requestBody"] = {
                    "content": {t: {"schema": {"$ref": self.prefix + request}} for t in request_types},
                    "required": request_required,
                }
            content = {t: {"schema": ref} for t in produces}
            op["responses"] = {
                **{code: {"description": _CODE_TEXT[code], "content": content} for code in codes},
                "401": {"description": "Unauthorized"},
            }
        else:
            op["consumes"] = list(request_types)
            op["produces"] = list(produces)
            op["schemes"] = ["https"]
            if request is not None:
                parameters.insert(
                    0,
                    {
                        "name": "body",
                        "in": "body",
                        "required": request_required,
                        "schema": {"$ref": self.prefix + request},
                    },
                )
            if parameters:
                op["parameters"] = parameters
            op["responses"] = {
                **{code: {"description": _CODE_TEXT[code], "schema": ref} for code in codes},
                "401": {"description": "Unauthorized"},
            }
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = gvk
        return op

    def add(self, path: str, method: str, op: dict[str, Any], path_params: list[dict[str, Any]]) -> None:
        item = self.paths.setdefault(path, {})
        item[method] = op
        item["parameters"] = [*path_params, self.query("pretty")]

    def resource(self, rt: ResourceType, kind_def: str, list_def: str) -> None:
        """The operations kube registers for a resource and its subresources."""
        base = rt.path()
        gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
        ns = "Namespaced" if rt.namespaced else ""
        name_param = self.path_param("name", f"name of the {rt.kind}")
        ns_param = self.path_param("namespace", "object name and auth scope, such as for teams and projects")
        patch_types = _CRD_PATCH_TYPES if self.crd else _BUILTIN_PATCH_TYPES
        if rt.namespaced:
            self.add(
                base,
                "get",
                self.operation(
                    path=base,
                    name=f"list{rt.kind}ForAllNamespaces",
                    action="list",
                    description=f"list or watch objects of kind {rt.kind}",
                    gvk=gvk,
                    response=list_def,
                    params=_LIST_PARAMS,
                ),
                [],
            )
            collection = base.replace(f"/{rt.plural}", f"/namespaces/{{namespace}}/{rt.plural}")
            scope = [ns_param]
        else:
            collection = base
            scope = []
        self.add(
            collection,
            "get",
            self.operation(
                path=collection,
                name=f"list{ns}{rt.kind}",
                action="list",
                description=f"list or watch objects of kind {rt.kind}",
                gvk=gvk,
                response=list_def,
                params=_LIST_PARAMS,
            ),
            scope,
        )
        self.add(
            collection,
            "post",
            self.operation(
                path=collection,
                name=f"create{ns}{rt.kind}",
                action="post",
                description=f"create{_article(rt.kind)}{rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=_WRITE_PARAMS,
                request=kind_def,
                extra_codes=("201", "202"),
            ),
            scope,
        )
        self.add(
            collection,
            "delete",
            self.operation(
                path=collection,
                name=f"deletecollection{ns}{rt.kind}",
                action="deletecollection",
                description=f"delete collection of {rt.kind}",
                gvk=gvk,
                response=STATUS,
                params=(
                    *_DELETE_PARAMS,
                    *[p for p in _LIST_PARAMS if p not in ("allowWatchBookmarks", "watch")],
                ),
                request=DELETE_OPTIONS,
                request_required=False,
            ),
            scope,
        )
        item = f"{collection}/{{name}}"
        item_scope = [name_param, *scope]
        self.add(
            item,
            "get",
            self.operation(
                path=item,
                name=f"read{ns}{rt.kind}",
                action="get",
                description=f"read the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
            ),
            item_scope,
        )
        self.add(
            item,
            "put",
            self.operation(
                path=item,
                name=f"replace{ns}{rt.kind}",
                action="put",
                description=f"replace the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=_WRITE_PARAMS,
                request=kind_def,
                extra_codes=("201",),
            ),
            item_scope,
        )
        self.add(
            item,
            "delete",
            self.operation(
                path=item,
                name=f"delete{ns}{rt.kind}",
                action="delete",
                description=f"delete{_article(rt.kind)}{rt.kind}",
                gvk=gvk,
                response=STATUS,
                params=_DELETE_PARAMS,
                request=DELETE_OPTIONS,
                request_required=False,
                extra_codes=("202",),
            ),
            item_scope,
        )
        self.add(
            item,
            "patch",
            self.operation(
                path=item,
                name=f"patch{ns}{rt.kind}",
                action="patch",
                description=f"partially update the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=(*_WRITE_PARAMS, "force"),
                request=PATCH,
                request_types=patch_types,
                extra_codes=("201",),
            ),
            item_scope,
        )
        self.builtin_defs.update((STATUS, DELETE_OPTIONS, PATCH))
        for sub in sorted(rt.subresources):
            self._subresource(rt, sub, item, item_scope, kind_def, gvk, ns, patch_types)

    def _subresource(
        self,
        rt: ResourceType,
        sub: str,
        item: str,
        scope: list[dict[str, Any]],
        kind_def: str,
        gvk: dict[str, str],
        ns: str,
        patch_types: tuple[str, ...],
    ) -> None:
        path = f"{item}/{sub}"
        title = sub[:1].upper() + sub[1:]
        if sub in ("eviction", "binding"):
            target, target_gvk = (
                (EVICTION, {"group": "policy", "kind": "Eviction", "version": "v1"})
                if sub == "eviction"
                else (BINDING, {"group": "", "kind": "Binding", "version": "v1"})
            )
            self.builtin_defs.add(target)
            self.add(
                path,
                "post",
                self.operation(
                    path=path,
                    name=f"create{ns}{rt.kind}{title}",
                    action="post",
                    description=f"create {sub} of{_article(rt.kind)}{rt.kind}",
                    gvk=target_gvk,
                    response=target,
                    params=_WRITE_PARAMS,
                    request=target,
                    extra_codes=("201", "202"),
                ),
                [self.path_param("name", f"name of the {title}"), *scope[1:]],
            )
            return
        if sub == "finalize":
            self.add(
                path,
                "put",
                self.operation(
                    path=path,
                    name=f"replace{ns}{rt.kind}Finalize",
                    action="put",
                    description=f"replace finalize of the specified {rt.kind}",
                    gvk=gvk,
                    response=kind_def,
                    params=_WRITE_PARAMS,
                    request=kind_def,
                    extra_codes=("201",),
                ),
                scope,
            )
            return
        target = kind_def
        target_gvk = gvk
        if sub == "scale":
            target = SCALE
            target_gvk = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
            self.builtin_defs.add(SCALE)
        for method, verb, action, text, extra in (
            ("get", "read", "get", f"read {sub} of the specified {rt.kind}", ()),
            ("put", "replace", "put", f"replace {sub} of the specified {rt.kind}", ("201",)),
            ("patch", "patch", "patch", f"partially update {sub} of the specified {rt.kind}", ("201",)),
        ):
            kwargs: dict[str, Any] = {}
            if method == "put":
                kwargs = {"params": _WRITE_PARAMS, "request": target}
            elif method == "patch":
                kwargs = {"params": (*_WRITE_PARAMS, "force"), "request": PATCH, "request_types": patch_types}
            self.add(
                path,
                method,
                self.operation(
                    path=path,
                    name=f"{verb}{ns}{rt.kind}{title}",
                    action=action,
                    description=text,
                    gvk=target_gvk,
                    response=target,
                    extra_codes=extra,
                    **kwargs,
                ),
                scope,
            )


_CODE_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}
