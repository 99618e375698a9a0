"""Offline validation of manifests (``aiplane validate``): what the API server would say, before apply.

Our kinds are checked against the very CRD schemas we install (pruning, defaulting, OpenAPI validation,
CEL rules, in kube-apiserver's order), so "validates here" means "is accepted there". Built-in kinds
are checked with kubernetes-validate's strict schemas. Unknown fields are errors here, where the API
server would silently prune them: that is the mistake a user most wants to hear about.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from aiplane.api.crdgen import crd_for
from aiplane.api.registry import model_for
from aiplane.apimachinery import boundedyaml
from aiplane.schema.validate import admit

# DNS-1123 subdomain: what kube-apiserver requires of custom resource names.
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Problem:
    """One reason a document is invalid, located well enough to fix it without guessing."""

    file: str
    document: int  # 1-based position in the YAML stream
    object: str  # Kind/name, or "?" when the document has none
    message: str

    def __str__(self) -> str:
        if self.document == 0:  # the file itself: no document to point at
            return f"{self.file}: {self.message}"
        return f"{self.file}#{self.document} {self.object}: {self.message}"


@dataclass(frozen=True)
class Checked:
    file: str
    document: int
    object: str
    problems: tuple[Problem, ...]


@functools.cache
def _schema(api_version: str, kind: str) -> dict[str, Any] | None:
    model = model_for(api_version, kind)
    if model is None:
        return None
    schema: dict[str, Any] = crd_for(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _object_name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{doc.get('kind', '?')}/{name}"


#: More checks of a schema-valid object (the controllers' own, passed in by the command line, which may
#: import them): each returns "field: rule" messages.
ExtraCheck = Callable[[dict[str, Any]], list[str]]


def check_document(doc: Any, file: str, index: int, extra: ExtraCheck | None = None) -> Checked:
    """Validate one parsed document; ``extra`` runs only on what the schema accepted."""
    if not isinstance(doc, dict):
        problem = Problem(file, index, "?", "document is not a Kubernetes object (a mapping)")
        return Checked(file, index, "?", (problem,))
    label = _object_name(doc)
    messages: list[str] = []
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not api_version:
        messages.append("apiVersion: required field is missing")
    if not isinstance(kind, str) or not kind:
        messages.append("kind: required field is missing")
    if not messages:
        assert isinstance(api_version, str) and isinstance(kind, str)
        schema = _schema(api_version, kind)
        if schema is not None:
            messages.extend(_check_custom(doc, schema, namespaced=_namespaced(api_version, kind)))
        else:
            messages.extend(_check_builtin(doc, api_version, kind))
        if not messages and extra is not None:
            messages.extend(extra(doc))
    return Checked(file, index, label, tuple(Problem(file, index, label, m) for m in messages))


def _namespaced(api_version: str, kind: str) -> bool:
    model = model_for(api_version, kind)
    return model is not None and model.crd.scope == "Namespaced"


def _check_custom(doc: dict[str, Any], schema: dict[str, Any], *, namespaced: bool) -> list[str]:
    messages = _check_metadata(doc.get("metadata"), namespaced=namespaced)
    _, pruned, errors = admit(doc, schema)
    messages.extend(f"{path}: unknown field" for path in pruned)
    messages.extend(error.render() for error in errors)
    return messages


def _check_metadata(meta: Any, *, namespaced: bool) -> list[str]:
    if meta is None:
        return ["metadata: required field is missing"]
    if not isinstance(meta, dict):
        return ["metadata: must be an object"]
    name, generate = meta.get("name"), meta.get("generateName")
    out: list[str] = []
    if not name and not generate:
        out.append("metadata.name: name or generateName is required")
    if isinstance(name, str) and name and (len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)):
        out.append(
            f'metadata.name: "{name}" is not a DNS-1123 subdomain (lower case alphanumerics, "-" and ".", '
            "starting and ending alphanumeric, at most 253 characters)"
        )
    namespace = meta.get("namespace")
    if namespace is not None and not namespaced:
        out.append("metadata.namespace: must not be set on a cluster-scoped kind")
    if isinstance(namespace, str) and not _DNS1123_LABEL.match(namespace):
        out.append(f'metadata.namespace: "{namespace}" is not a DNS-1123 label')
    return out


def _check_builtin(doc: dict[str, Any], api_version: str, kind: str) -> list[str]:
    try:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)
    except SchemaNotFoundError:
        return [f"unknown kind {kind} in {api_version}: neither ours nor a Kubernetes 1.37 built-in"]
    except ValidationError as exc:
        path = ".".join(str(p) for p in exc.path) or "(root)"
        if kind == "Secret":
            # jsonschema quotes the offending value; a Secret's values must never be echoed.
            return [f"{path}: fails the {exc.validator!r} rule of the Secret schema"]
        return [f"{path}: {exc.message}"]
    return []


def iter_documents(text: str) -> Iterator[Any]:
    for doc in boundedyaml.load_all(text):
        boundedyaml.check_depth(doc)
        if doc is not None:
            yield doc


def _unreadable(exc: OSError | UnicodeDecodeError) -> str:
    """Why a manifest file cannot be read, in the words a shell would use (no errno, no repr)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start}); manifests are UTF-8 YAML"
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory; give the manifest files in it (e.g. DIR/*.yaml)"
    if isinstance(exc, PermissionError):
        return "permission denied: cannot read it"
    return f"cannot read it: {exc.strerror or exc}"


def _unparseable(exc: yaml.YAMLError) -> str:
    """A YAML syntax error as "line L, column C: what", not PyYAML's multi-line report."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None:  # where the unclosed thing began, e.g. a "[" at EOF
        problem += (
            f" ({context} that began at line {context_mark.line + 1}, column {context_mark.column + 1})"
        )
    return f"not valid YAML: {where}{problem}"


def manifest_files(path: Path) -> list[Path]:
    """``path`` itself, or for a directory its ``.yaml``, ``.yml`` and ``.json`` files (sorted, not
    recursive: what ``kubectl apply -f DIR`` reads)."""
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))


def check_file(path: Path, extra: ExtraCheck | None = None) -> list[Checked]:
    """Validate every document of a YAML stream; a file that cannot be read or parsed is one problem."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        docs = list(iter_documents(text))
    except (OSError, UnicodeDecodeError) as exc:
        message = _unreadable(exc)
    except yaml.YAMLError as exc:
        message = _unparseable(exc)
    else:
        return [check_document(doc, name, index, extra) for index, doc in enumerate(docs, start=1)]
    return [Checked(name, 0, "?", (Problem(name, 0, "?", message),))]
