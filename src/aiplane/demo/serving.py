"""The serving floor of ModelInfers while their nodes are drained: measured, not sampled.

What a repartitioning under live inference promises is "never fewer than ``replicas - maxUnavailable``
InferGroups available". A group is available while every pod it should have is live (not
terminating), Running and Ready — the ModelInfer's own notion. This store listener recomputes that
on *every* committed pod and ModelInfer change, so one moment below the floor is seen even if it
lasts a microsecond; the demo prints the minimum it measured and the tests assert on it.

It also follows what explains the number: the per-group PodDisruptionBudgets (released, protected),
the cordoned nodes under the ModelInfer's pods, and its ``DisruptionHeld`` condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.naming import LABEL_GROUP_NAME, LABEL_NAME
from aiplane.controllers.modelinfer.objects import expected_pod_count
from aiplane.controllers.modelinfer.validation import resolve_max_unavailable, rolling_update_configuration
from aiplane.demo.common import StoreView
from aiplane.sim.apiserver.store import DELETED, Event

POD_KEY = "/pods"
MI_KEY = "workload.volcano.sh/modelinfers"
PDB_KEY = "policy/poddisruptionbudgets"
NODE_KEY = "/nodes"
DISRUPTION_HELD = "DisruptionHeld"
#: Breaches kept for the report (the first ones say what went wrong; the minimum counts them all).
MAX_BREACHES = 50

Obj = dict[str, Any]


def _key(obj: Mapping[str, Any]) -> str:
    return f"{objects.namespace(obj)}/{objects.name(obj)}"


def _ready(pod: Mapping[str, Any]) -> bool:
    status = objects.status(pod)
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def floor_of(mi: Mapping[str, Any]) -> int:
    """``replicas - maxUnavailable`` (never below 0), with the controller's own resolution."""
    replicas = int(objects.spec(mi).get("replicas", 1))
    try:
        unavailable = resolve_max_unavailable(
            rolling_update_configuration(mi).get("maxUnavailable"), replicas
        )
    except ValueError:
        unavailable = 1
    return max(0, replicas - unavailable)


@dataclass
class Breach:
    """One committed change that left a tracked ModelInfer below its floor."""

    modelinfer: str
    available: int
    floor: int
    rv: int
    groups: dict[str, str]

    def __str__(self) -> str:
        return (
            f"ModelInfer {self.modelinfer}: {self.available} groups available, floor {self.floor} "
            f"(at resourceVersion {self.rv}; groups {self.groups})"
        )


@dataclass
class FloorWatch:
    """Follows every ModelInfer of the store (or of ``namespace``) from its committed changes."""

    namespace: str | None = None
    mis: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, dict[str, Obj]] = field(default_factory=dict)  # modelinfer key -> pod name -> pod
    budgets: dict[str, dict[str, Obj]] = field(default_factory=dict)  # modelinfer key -> name -> PDB
    cordoned: set[str] = field(default_factory=set)
    tracked: set[str] = field(default_factory=set)
    minimum: dict[str, int] = field(default_factory=dict)
    breaches: list[Breach] = field(default_factory=list)
    changes: int = 0
    released_ever: dict[str, set[str]] = field(default_factory=dict)

    # --- following the store ----------------------------------------------------------------------

    def seed(self, store: StoreView) -> None:
        """What the store holds now (call before subscribing, from the same thread)."""
        for key in (NODE_KEY, MI_KEY, PDB_KEY, POD_KEY):
            for obj in store.items(key):
                self._apply(key, "ADDED", obj)

    def __call__(self, event: Event) -> None:
        if event.key not in (POD_KEY, MI_KEY, PDB_KEY, NODE_KEY):
            return
        owner = self._apply(event.key, event.type, event.obj)
        if owner is not None and owner in self.tracked:
            self.changes += 1
            self._measure(owner, event.rv)

    def _apply(self, key: str, type_: str, obj: Obj) -> str | None:
        """Update our copy; the ModelInfer the change concerns (None for nodes and others' objects)."""
        if key == NODE_KEY:
            name = objects.name(obj)
            if type_ != DELETED and objects.spec(obj).get("unschedulable"):
                self.cordoned.add(name)
            else:
                self.cordoned.discard(name)
            return None
        if self.namespace is not None and objects.namespace(obj) != self.namespace:
            return None
        if key == MI_KEY:
            mi_key = _key(obj)
            if type_ == DELETED:
                self.mis.pop(mi_key, None)
            else:
                self.mis[mi_key] = obj
            return mi_key
        owner_name = objects.labels(obj).get(LABEL_NAME)
        if not owner_name:
            return None
        mi_key = f"{objects.namespace(obj)}/{owner_name}"
        store = self.pods if key == POD_KEY else self.budgets
        items = store.setdefault(mi_key, {})
        if type_ == DELETED:
            items.pop(objects.name(obj), None)
        else:
            items[objects.name(obj)] = obj
            if key == PDB_KEY and _released(obj):
                self.released_ever.setdefault(mi_key, set()).add(objects.name(obj))
        return mi_key if key == POD_KEY else None

    def _measure(self, mi_key: str, rv: int) -> None:
        mi = self.mis.get(mi_key)
        if mi is None:
            return
        available = self.available(mi_key)
        self.minimum[mi_key] = min(self.minimum.get(mi_key, available), available)
        floor = floor_of(mi)
        if available < floor and len(self.breaches) < MAX_BREACHES:
            self.breaches.append(Breach(mi_key, available, floor, rv, self.group_states(mi_key)))

    # --- what is measured -------------------------------------------------------------------------

    def track(self, keys: Iterable[str] | None = None) -> list[str]:
        """Start measuring the ModelInfers (all known, or ``keys``) whose groups are all available
        now; the others are left out (a floor they never reached cannot be kept). Returns them."""
        started = []
        for mi_key in sorted(keys if keys is not None else self.mis):
            mi = self.mis.get(mi_key)
            if mi is None:
                continue
            replicas = int(objects.spec(mi).get("replicas", 1))
            if self.available(mi_key) >= replicas:
                self.tracked.add(mi_key)
                self.minimum[mi_key] = self.available(mi_key)
                started.append(mi_key)
        return started

    def groups(self, mi_key: str) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for pod in self.pods.get(mi_key, {}).values():
            out.setdefault(objects.labels(pod).get(LABEL_GROUP_NAME, "?"), []).append(pod)
        return out

    def _expected(self, mi_key: str) -> int:
        roles = objects.spec(self.mis.get(mi_key)).get("template", {}).get("roles") or []
        return expected_pod_count(roles)

    def group_available(self, mi_key: str, members: list[Obj]) -> bool:
        live = [p for p in members if not objects.is_deleting(p)]
        return len(live) == self._expected(mi_key) and all(_ready(p) for p in live)

    def available(self, mi_key: str) -> int:
        return sum(1 for members in self.groups(mi_key).values() if self.group_available(mi_key, members))

    def group_states(self, mi_key: str) -> dict[str, str]:
        out = {}
        for group, members in sorted(self.groups(mi_key).items()):
            live = [p for p in members if not objects.is_deleting(p)]
            ready = sum(1 for p in live if _ready(p))
            out[group] = f"{ready}/{self._expected(mi_key)} ready" + (
                f", {len(members) - len(live)} terminating" if len(live) != len(members) else ""
            )
        return out

    def floor(self, mi_key: str) -> int:
        return floor_of(self.mis.get(mi_key) or {})

    def released(self, mi_key: str) -> list[str]:
        return sorted(n for n, pdb in self.budgets.get(mi_key, {}).items() if _released(pdb))

    def protected(self, mi_key: str) -> list[str]:
        return sorted(n for n, pdb in self.budgets.get(mi_key, {}).items() if not _released(pdb))

    def draining_under(self, mi_key: str) -> list[str]:
        """Cordoned nodes the ModelInfer's live pods stand on."""
        return sorted(
            {
                str(objects.spec(p).get("nodeName"))
                for p in self.pods.get(mi_key, {}).values()
                if objects.spec(p).get("nodeName") in self.cordoned and not objects.is_deleting(p)
            }
        )

    def held(self, mi_key: str) -> str:
        """The ``DisruptionHeld`` message while True, else ''."""
        for c in objects.status(self.mis.get(mi_key)).get("conditions") or []:
            if isinstance(c, Mapping) and c.get("type") == DISRUPTION_HELD and c.get("status") == "True":
                return str(c.get("message") or "")
        return ""

    def kept(self, mi_key: str) -> bool:
        """Never below the floor since tracking started (and tracking did start)."""
        return mi_key in self.tracked and not any(b.modelinfer == mi_key for b in self.breaches)

    # --- rendering --------------------------------------------------------------------------------

    def render(self, mi_key: str) -> Text:
        available, floor = self.available(mi_key), self.floor(mi_key)
        replicas = int(objects.spec(self.mis.get(mi_key)).get("replicas", 1))
        low = self.minimum.get(mi_key)
        held = self.held(mi_key)
        draining = self.draining_under(mi_key)
        text = Text.assemble(
            ("serving ", "bold"),
            (mi_key, "bold cyan"),
            "  available groups ",
            (f"{available}/{replicas}", "bold red" if available < floor else "bold green"),
            f" (floor {floor})   fewest seen ",
            (str(low if low is not None else "-"), "bold red" if low is not None and low < floor else "bold"),
            f" over {self.changes} changes\n",
            "budgets ",
            (f"{len(self.released(mi_key))} released", "yellow" if self.released(mi_key) else "dim"),
            f" {', '.join(self.released(mi_key))}  ",
            (f"{len(self.protected(mi_key))} protected", "green"),
            "   its pods on cordoned nodes: ",
            (", ".join(draining) or "none", "yellow" if draining else "dim"),
        )
        if held:
            short = held if len(held) <= 150 else held[:149] + "…"
            text.append("\nDisruptionHeld ", style="bold yellow")
            text.append(short)
        return text


def _released(pdb: Mapping[str, Any]) -> bool:
    value = objects.spec(pdb).get("minAvailable")
    return value == 0 and not isinstance(value, bool)
