"""Building blocks shared by every API group: the model base class and the Kubernetes built-in types.

The pydantic models are the single source of truth for our custom resources: the CRDs are generated
from them (:mod:`aiplane.api.crdgen`). Each model field carries what the CRD needs — description,
default, enum and limits — in pydantic's own vocabulary, and CRD-only markers (CEL rules, list types)
through ``json_schema_extra``.

Built-in Kubernetes types (PodSpec, Probe, LabelSelector, …) are plain ``dict`` values here: their
schemas come from the Kubernetes OpenAPI document (:mod:`aiplane.apimachinery.builtin`), and a model checks an
embedded value against that schema, so an unknown field inside a PodSpec is rejected just like an
unknown field of ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from aiplane.apimachinery import builtin

#: The marker our CRD generator replaces with the structural schema of a Kubernetes definition.
BUILTIN_MARKER = "x-aiplane-builtin"
#: The marker whose value the CRD generator copies verbatim (an already structural schema).
STRUCTURAL_MARKER = "x-aiplane-structural"


class ApiModel(BaseModel):
    """Base of every spec/status type: camelCase on the wire, unknown fields rejected.

    Unknown fields are rejected because kube-apiserver prunes them silently: a typo like
    ``maxParalel`` would otherwise vanish and the user would never know why the limit is ignored.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=False,
        use_attribute_docstrings=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server would store it: JSON-compatible, absent fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ObjectMeta(BaseModel):
    """The subset of metadata users write; everything else the server sets is accepted as-is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str | None = None
    generateName: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str | None = None
    priority: int = 0

    def to_crd(self) -> dict[str, Any]:
        col: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.description:
            col["description"] = self.description
        if self.priority:
            col["priority"] = self.priority
        return col


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class Scale:
    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.labelSelector"


@dataclass(frozen=True)
class CrdInfo:
    """How a kind is served: everything in the CRD that is not the schema."""

    group: str
    kind: str
    plural: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: Scale | None = None
    version: str = "v1alpha1"
    description: str = ""
    #: CEL rules on the whole object (``self`` is the object: rules that need both spec and status).
    root_validations: tuple[dict[str, Any], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


class Resource(ApiModel):
    """A top-level kind. Subclasses set ``crd``; ``spec``/``status`` are declared per kind."""

    crd: ClassVar[CrdInfo]

    apiVersion: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _check_type_meta(self) -> Resource:
        if self.apiVersion != self.crd.api_version:
            raise ValueError(f"apiVersion must be {self.crd.api_version!r}, not {self.apiVersion!r}")
        if self.kind != self.crd.kind:
            raise ValueError(f"kind must be {self.crd.kind!r}, not {self.kind!r}")
        return self


# --- Kubernetes built-in types ---------------------------------------------------------------------


def schema_checked(schema: Callable[[], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A pydantic validator checking a dict against a structural schema, as the API server would.

    It returns the pruned and defaulted copy, so a model holds what the server would store (a port
    without ``protocol`` reads back with ``protocol: TCP``), and rejects unknown fields and invalid
    values with their paths. ``schema`` is called once, on first use: built-in schemas are large.
    """
    cached: list[dict[str, Any]] = []

    def check(value: dict[str, Any]) -> dict[str, Any]:
        # On first use, not at import: the operator loads these models to read its objects, and must not
        # carry the schema validator and CEL evaluator for that (tests/unit/test_layers.py).
        from aiplane.schema.validate import check_value  # noqa: PLC0415

        if not cached:
            cached.append(schema())
        stored, errors = check_value(value, cached[0])
        if errors:
            raise ValueError("; ".join(e.render() for e in errors))
        return stored

    return check


class LazyStructuralSchema:
    """Like ``WithJsonSchema``, for an already structural schema built only when a schema is asked for."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build = build

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {STRUCTURAL_MARKER: self._build()}


def builtin_schema(definition: str) -> WithJsonSchema:
    """The JSON-schema marker the CRD generator expands into the Kubernetes definition ``definition``."""
    return WithJsonSchema({BUILTIN_MARKER: definition})


def builtin_check(definition: str) -> AfterValidator:
    """Validation of a value of the Kubernetes definition ``definition`` (see :func:`schema_checked`)."""
    return AfterValidator(schema_checked(lambda: builtin.structural(definition)))


_QUANTITY_RE = re.compile(builtin.QUANTITY_PATTERN)


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a valid quantity (e.g. 8, 500m, 64Gi)")
    return value


def _reject_bool(value: Any) -> Any:
    # YAML 'yes'/'true' would otherwise become an int through bool; the API server rejects it.
    if isinstance(value, bool):
        raise ValueError("must be an integer or a string")
    return value


Quantity = Annotated[
    int | str,
    BeforeValidator(_reject_bool),
    AfterValidator(_check_quantity),
    WithJsonSchema({BUILTIN_MARKER: builtin.QUANTITY}),
]
IntOrString = Annotated[
    int | str,
    BeforeValidator(_reject_bool),
    WithJsonSchema({BUILTIN_MARKER: builtin.INT_OR_STRING}),
]
Time = Annotated[str, WithJsonSchema({BUILTIN_MARKER: builtin.TIME})]
RawExtension = Annotated[dict[str, Any], WithJsonSchema({BUILTIN_MARKER: builtin.RAW_EXTENSION})]

_PODSPEC = "io.k8s.api.core.v1.PodSpec"
PodSpec = Annotated[dict[str, Any], builtin_schema(_PODSPEC), builtin_check(_PODSPEC)]
_CONTAINER = "io.k8s.api.core.v1.Container"
Container = Annotated[dict[str, Any], builtin_schema(_CONTAINER), builtin_check(_CONTAINER)]
_ENVVAR = "io.k8s.api.core.v1.EnvVar"
EnvVar = Annotated[dict[str, Any], builtin_schema(_ENVVAR), builtin_check(_ENVVAR)]
_PROBE = "io.k8s.api.core.v1.Probe"
Probe = Annotated[dict[str, Any], builtin_schema(_PROBE), builtin_check(_PROBE)]
_LABELSELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
LabelSelector = Annotated[dict[str, Any], builtin_schema(_LABELSELECTOR), builtin_check(_LABELSELECTOR)]
_RESOURCECLAIM = "io.k8s.api.core.v1.ResourceClaim"
ResourceClaim = Annotated[dict[str, Any], builtin_schema(_RESOURCECLAIM), builtin_check(_RESOURCECLAIM)]
_HORIZONTALPODAUTOSCALERBEHAVIOR = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior"
HorizontalPodAutoscalerBehavior = Annotated[
    dict[str, Any],
    builtin_schema(_HORIZONTALPODAUTOSCALERBEHAVIOR),
    builtin_check(_HORIZONTALPODAUTOSCALERBEHAVIOR),
]
_METRICSPEC = "io.k8s.api.autoscaling.v2.MetricSpec"
MetricSpec = Annotated[dict[str, Any], builtin_schema(_METRICSPEC), builtin_check(_METRICSPEC)]

PersistentVolumeAccessMode = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]

_CONDITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"


def conditions_field(description: str) -> Any:
    """A ``conditions`` list: metav1.Condition items, merged by ``type`` (a list-map, as upstream)."""
    return Field(
        default=None,
        description=description,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )


Condition = Annotated[dict[str, Any], builtin_schema(_CONDITION), builtin_check(_CONDITION)]
Conditions = list[Condition] | None


def rule(
    expression: str, message: str, *, field_path: str | None = None, reason: str | None = None
) -> dict[str, Any]:
    """One ``x-kubernetes-validations`` entry (a CEL rule evaluated by the API server)."""
    entry: dict[str, Any] = {"rule": expression, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry
