"""DynamoGraphDeploymentRequest controller: SLA-driven planning, then (autoApply) a DGD.

::

    observe   the DGDR (cache + our own status writes), at validation its spec, base ConfigMap
              (one read) and the cluster's nodes (GPU type and budget, request_target); its
              profiling Job and output ConfigMap (labelled) and its DGD from caches; the plan of an
              offline request from the plan task it started
    decide    request_decide.decide (pure state machine)
    act       create the Job / start the plan off the event loop / write the output ConfigMap /
              create the DGD, each at most once, then the status; Events of the transitions

Offline requests (``online: false``) are planned by ``aiplane.planner.plan`` in a worker thread
(``asyncio.to_thread``): the reconcile returns at once, the plan task enqueues the request when it
finishes, so a slow plan occupies neither a worker nor the event loop. The plan lives in memory
until its result is written to ``dgdr-output-<name>``; after an operator restart a request still in
Profiling is planned again (plans are deterministic).

Online requests run upstream's profiling Job (``request_job``) and take its output ConfigMap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import yaml
from pydantic import ValidationError

from aiplane.api import kinds
from aiplane.api.dynamo import DynamoGraphDeploymentRequestSpec
from aiplane.apimachinery import boundedyaml, objects
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.dynamo.request_decide import (
    Decision,
    DgdSeen,
    Observed,
    Profile,
    RequestAction,
    RequestObserved,
    RequestView,
    decide,
)
from aiplane.controllers.dynamo.request_graph import (
    LABEL_DGDR_NAME,
    LABEL_DGDR_NAMESPACE,
    GraphPlan,
    generate_graph,
    with_request_metadata,
)
from aiplane.controllers.dynamo.request_job import (
    JOB_NAME_PREFIX,
    OUTPUT_KEY,
    job_seen,
    output_configmap,
    output_name,
    profiling_job,
)
from aiplane.controllers.dynamo.request_target import Target, find_target
from aiplane.controllers.dynamo.request_templates import base_graph
from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import Controller, Request, Result, field_manager_for
from aiplane.kube.events import EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import CONFIGMAPS, JOBS, NODES, PODS
from aiplane.kube.shape import Shaped
from aiplane.kube.status import StatusWriter
from aiplane.planner import report
from aiplane.planner.api import plan
from aiplane.planner.systems import resolve_system
from aiplane.planner.types import Plan, PlannerError, PlanRequest, PlanResult, SystemSpec

Obj = dict[str, Any]
Planner = Callable[[PlanRequest], PlanResult]
Systems = Callable[[str], SystemSpec]

#: The key of the profiling ConfigMap that may hold the model's Hugging Face ``config.json``.
MODEL_CONFIG_KEY: Final = "config.json"
#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "dynamographdeploymentrequest"
FIELD_MANAGER: Final = field_manager_for(NAME)
DGDR_KIND: Final = "DynamoGraphDeploymentRequest"


def default_plan(request: PlanRequest) -> PlanResult:
    """The planner (tests inject a slow or failing one)."""
    return plan(request)


def default_systems(name: str) -> SystemSpec:
    """The planner's GPU systems table."""
    return resolve_system(name)


def canonical(systems: Systems) -> Callable[[str], tuple[str, str, int]]:
    """(system, resource, GPUs per node) of a name; ValueError naming the known ones."""

    def resolve(name: str) -> tuple[str, str, int]:
        try:
            spec = systems(name)
        except PlannerError as exc:
            raise ValueError(str(exc).removeprefix("system: ")) from exc
        return spec.name, spec.resource, spec.gpus_per_node

    return resolve


def _spec(dgdr: Mapping[str, Any]) -> DynamoGraphDeploymentRequestSpec | str:
    try:
        return DynamoGraphDeploymentRequestSpec.model_validate(objects.spec(dgdr))
    except ValidationError as exc:
        return "; ".join(
            f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        )


def _model_config(
    data: Mapping[str, Any], configmap: str, field: str
) -> tuple[Mapping[str, Any] | None, str]:
    """The ``config.json`` a profiling ConfigMap may hold (None without one), or the problem with it."""
    if MODEL_CONFIG_KEY not in data:
        return None, ""
    try:
        loaded = json.loads(data[MODEL_CONFIG_KEY])
    except ValueError as exc:
        return None, f"{field}: key {MODEL_CONFIG_KEY} of ConfigMap {configmap} is not JSON: {exc}"
    if not isinstance(loaded, dict):
        return None, f"{field}: key {MODEL_CONFIG_KEY} of ConfigMap {configmap} is not a JSON object"
    return loaded, ""


@dataclasses.dataclass(frozen=True)
class RequestObservation:
    """One request as observed: what :func:`~.request_decide.decide` reads (``state``) and what
    the executor needs to carry out its actions (the parsed spec, the base graph, the target)."""

    dgdr: Obj
    spec: DynamoGraphDeploymentRequestSpec | str
    state: RequestObserved
    base: Obj | None = None
    target: Target | None = None
    model_config: Mapping[str, Any] | None = None


class RequestController:
    """The DGDR controller's four steps (:class:`~aiplane.kube.shape.Shape`)."""

    def __init__(
        self,
        client: KubeClient,
        dgdrs: Informer,
        jobs: Informer,
        outputs: Informer,
        dgds: Informer,
        nodes: Informer,
        recorder: EventRecorder,
        clock: Clock,
        options: DynamoOptions,
        planner: Planner | None = None,
        systems: Systems | None = None,
        pods: Informer | None = None,
    ) -> None:
        self.client = client
        #: Bound pods: the GPUs they request are not free for a new plan.
        self.pods = pods
        self.dgdrs = dgdrs
        self.jobs = jobs
        self.outputs = outputs
        self.dgds = dgds
        self.nodes = nodes
        self.recorder = recorder
        self.clock = clock
        self.options = options
        self.planner: Planner = planner or default_plan
        self.canonical = canonical(systems or default_systems)
        self.status = StatusWriter(client, kinds.DGDRS, FIELD_MANAGER)
        # Our own status writes, served in place of the cache until it shows them (no timeout: a view
        # is dropped when the cache catches up or the request's delete event comes).
        self.expectations = Expectations(clock=clock.monotonic)
        #: The profiling Job, the output ConfigMap and the DGD: created (or replaced) when they
        #: differ, never read back through expectations.
        self.writer = ChildWriter(client, FIELD_MANAGER)
        #: Offline plans in flight or done, by (uid, generation).
        self.plans: dict[tuple[str, int], asyncio.Task[Profile]] = {}
        #: The output ConfigMap of each finished offline plan, written when its result is reported.
        self.output_bodies: dict[tuple[str, int], Obj] = {}
        self.output_namespaces: dict[tuple[str, int], str] = {}
        self.plan_owners: dict[str, tuple[str, str]] = {}
        self.controller: Controller | None = None

    async def observe(self, request: Request) -> RequestObservation | None:
        namespace, name = request.namespace or "", request.name
        key = f"{namespace}/{name}"
        # Our own status writes overlay the cache until it shows them.
        dgdr = self.expectations.view(expectation_key(DGDR_KIND, namespace, name), self.dgdrs.get(key))
        if dgdr is None:
            self._forget(key)  # gone: drop its plans and output bodies
            return None
        spec = _spec(dgdr)
        view = RequestView(
            name=name,
            namespace=namespace,
            generation=objects.generation(dgdr) or 1,
            online=not isinstance(spec, str) and spec.online,
            auto_apply=not isinstance(spec, str) and spec.autoApply,
            best_effort=not isinstance(spec, str) and spec.autoApplyBestEffort,
            status=objects.status(dgdr),
        )
        seen, base, target, model_config = await self._observe(dgdr, view, spec)
        return RequestObservation(dgdr, spec, RequestObserved(view, seen), base, target, model_config)

    def decide(self, observed: RequestObservation, now: datetime) -> Decision:
        return decide(observed.state, now)

    async def act(self, observed: RequestObservation, decision: Decision) -> None:
        dgdr, spec, seen = observed.dgdr, observed.spec, observed.state.seen
        for action in decision.actions:
            if action is RequestAction.CREATE_JOB and not isinstance(spec, str):
                await self._create_job(dgdr, spec)
            elif (
                action is RequestAction.START_PLAN
                and not isinstance(spec, str)
                and observed.target is not None
            ):
                self._start_plan(dgdr, spec, observed.target, observed.base, observed.model_config)
            elif action is RequestAction.WRITE_OUTPUT and seen.profile is not None:
                await self._write_output(dgdr)
            elif action is RequestAction.CREATE_DGD:
                await self._create_dgd(decision.status.get("generatedDeployment") or {})

    async def report(self, observed: RequestObservation, decision: Decision) -> Result | None:
        """The status, and the state machine's Events once it is written (each told once)."""
        dgdr = observed.dgdr
        written = await self.status.write(dgdr, decision.status)
        if written is not None:
            key = expectation_key(DGDR_KIND, objects.namespace(dgdr), objects.name(dgdr))
            self.expectations.wrote(key, dgdr, written, conditional=True)
            for type_, reason, message in decision.events:
                self.recorder.emit(dgdr, type_, reason, message)
        return None

    def _forget(self, key: str) -> None:
        """The request is gone: drop what was kept for it (its plans and output bodies)."""
        namespace, _, name = key.partition("/")
        self.expectations.forget(expectation_key(DGDR_KIND, namespace, name))
        uids = {u for (u, _g) in self.plans} | {u for (u, _g) in self.output_bodies}
        for uid in uids:
            if self.dgdrs.get(key) is None and self._plan_of(uid, namespace, name):
                for k in [k for k in self.plans if k[0] == uid]:
                    self.plans.pop(k).cancel()
                for k in [k for k in self.output_bodies if k[0] == uid]:
                    self.output_bodies.pop(k)
                    self.output_namespaces.pop(k, None)

    def _plan_of(self, uid: str, namespace: str, name: str) -> bool:
        return self.plan_owners.get(uid) == (namespace, name)

    # --- observe ----------------------------------------------------------------------------------

    async def _observe(
        self, dgdr: Obj, view: RequestView, spec: DynamoGraphDeploymentRequestSpec | str
    ) -> tuple[Observed, Obj | None, Target | None, Mapping[str, Any] | None]:
        state = view.state
        changed = view.generation != view.observed_generation
        if isinstance(spec, str):
            return Observed(problems=(spec,)), None, None, None
        base: Obj | None = None
        model_config: Mapping[str, Any] | None = None
        target: Target | None = None
        problems: list[str] = []
        validated = ""
        if state in ("", "Pending", "Profiling") or (state == "Failed" and changed):
            base, model_config, problem = await self._base(dgdr, spec)
            problems += [problem] if problem else []
            if spec.gpu is not None and spec.gpu.minNumGPUsPerEngine > spec.gpu.maxNumGPUsPerEngine:
                problems.append(
                    f"spec.gpu.minNumGPUsPerEngine: {spec.gpu.minNumGPUsPerEngine} is more than "
                    f"spec.gpu.maxNumGPUsPerEngine {spec.gpu.maxNumGPUsPerEngine}"
                )
            if spec.online:
                if not self.options.profiler_image:
                    problems.append("spec.online: the operator was started without --profiler-image")
            else:
                found = find_target(
                    self.nodes.list(),
                    spec.gpu.type if spec.gpu else None,
                    self.canonical,
                    self.pods.list() if self.pods is not None else (),
                    spec.gpu.totalGpus if spec.gpu else None,
                )
                if isinstance(found, str):
                    problems.append(found)
                else:
                    target = found
                    validated = found.describe()
        seen = Observed(problems=tuple(problems), validated=validated, target=self._where(dgdr, view, spec))
        if state == "Profiling" or (state in ("", "Failed") and not problems):
            seen = dataclasses.replace(seen, **self._profiling(dgdr, view, spec))
        if state in ("Deploying", "Ready"):
            seen = dataclasses.replace(seen, dgd=await self._dgd(view))
        return seen, base, target, model_config

    async def _base(
        self, dgdr: Obj, spec: DynamoGraphDeploymentRequestSpec
    ) -> tuple[Obj | None, Mapping[str, Any] | None, str]:
        """The base graph and the model's Hugging Face config from the referenced ConfigMap (one live
        read), else None (the built-in template; the planner's registry); the third item is a problem.

        The ConfigMap may hold ``config.json`` (a model the planner's registry does not know, or a
        fine-tune of another shape) beside the base graph under ``key``; with ``config.json`` and no
        base graph, the built-in template is used."""
        ref = spec.profilingConfig.configMapRef if spec.profilingConfig else None
        if ref is None:
            return None, None, ""
        field = "spec.profilingConfig.configMapRef"
        namespace = objects.namespace(dgdr)
        try:
            cm = await self.client.get(CONFIGMAPS, ref.name, namespace)
        except ApiError as exc:
            # The decision depends on it: a missing ConfigMap fails validation, naming it.
            if exc.not_found:
                return None, None, f"{field}.name: ConfigMap {namespace}/{ref.name} not found"
            raise
        data = cm.get("data") or {}
        model_config, problem = _model_config(data, ref.name, field)
        if problem:
            return None, None, problem
        if ref.key not in data:
            if model_config is not None:
                return None, model_config, ""
            keys = ", ".join(sorted(data)) or "none"
            return None, None, f"{field}.key: ConfigMap {ref.name} has no key {ref.key!r} (keys: {keys})"
        try:
            parsed = boundedyaml.load(data[ref.key])  # user data: aliases and depth bounded
            boundedyaml.check_depth(parsed)
        except yaml.YAMLError as exc:
            return None, None, f"{field}: key {ref.key} of ConfigMap {ref.name} is not YAML: {exc}"
        if not isinstance(parsed, dict):
            return (
                None,
                None,
                f"{field}: key {ref.key} of ConfigMap {ref.name} is not a DynamoGraphDeployment",
            )
        return parsed, model_config, ""

    def _where(self, dgdr: Obj, view: RequestView, spec: DynamoGraphDeploymentRequestSpec) -> tuple[str, str]:
        generated = view.status.get("generatedDeployment") or {}
        meta = generated.get("metadata") or {}
        return str(meta.get("name") or view.name), str(meta.get("namespace") or view.namespace)

    def _profiling(
        self, dgdr: Obj, view: RequestView, spec: DynamoGraphDeploymentRequestSpec
    ) -> dict[str, Any]:
        if spec.online:
            job = self.jobs.get(f"{view.namespace}/{JOB_NAME_PREFIX}{view.name}")
            seen = job_seen(job) if job is not None else None
            if seen is None or not seen.complete:
                return {"job": seen}
            cm = self.outputs.get(f"{view.namespace}/{output_name(view.name)}")
            if cm is None or OUTPUT_KEY not in (cm.get("data") or {}):
                return {
                    "job": seen,
                    "waiting": f"profiling Job done; waiting for ConfigMap {output_name(view.name)}",
                }
            return {"job": seen, "profile": self._online_profile(view, spec, cm)}
        task = self.plans.get((objects.uid(dgdr), view.generation))
        if task is None or not task.done():
            return {}
        return {"profile": task.result()}

    def _online_profile(self, view: RequestView, spec: DynamoGraphDeploymentRequestSpec, cm: Obj) -> Profile:
        results = f"configmap/{output_name(view.name)}"
        try:
            graph = boundedyaml.load(cm["data"][OUTPUT_KEY])
            boundedyaml.check_depth(graph)
        except yaml.YAMLError as exc:
            return Profile(error=f"ConfigMap {output_name(view.name)} key {OUTPUT_KEY}: not YAML: {exc}")
        if not isinstance(graph, dict) or not isinstance(graph.get("spec"), dict):
            return Profile(
                error=f"ConfigMap {output_name(view.name)} key {OUTPUT_KEY}: not a DynamoGraphDeployment"
            )
        name, namespace = self._names(view, spec, graph)
        meta = {k: v for k, v in (graph.get("metadata") or {}).items() if k in ("labels", "annotations")}
        graph = {**graph, "metadata": {"name": name, "namespace": namespace, **meta}}
        generated = self._labelled(view, spec, graph)
        return Profile(generated=generated, results=results, message="profiling Job completed")

    def _names(
        self, view: RequestView, spec: DynamoGraphDeploymentRequestSpec, base: Mapping[str, Any] | None
    ) -> tuple[str, str]:
        """Upstream: the generated graph's own name unless overridden; namespace the DGDR's unless
        overridden. The built-in template is named after the request."""
        overrides = spec.deploymentOverrides
        own = (base or {}).get("metadata", {}).get("name") if base else None
        name = (overrides.name if overrides and overrides.name else None) or own or view.name
        namespace = (overrides.namespace if overrides and overrides.namespace else None) or view.namespace
        return str(name), str(namespace)

    def _labelled(self, view: RequestView, spec: DynamoGraphDeploymentRequestSpec, graph: Obj) -> Obj:
        overrides = spec.deploymentOverrides
        return with_request_metadata(
            graph,
            view.name,
            view.namespace,
            overrides.labels if overrides else None,
            overrides.annotations if overrides else None,
        )

    async def _dgd(self, view: RequestView) -> DgdSeen | None:
        deployment = view.status.get("deployment") or {}
        if not deployment.get("created"):
            return None
        key = f"{deployment.get('namespace')}/{deployment.get('name')}"
        dgd = self.dgds.get(key)
        if dgd is None:
            try:  # the cache may not show a DGD created a moment ago: ask before calling it deleted
                dgd = await self.client.get(
                    kinds.DGDS, str(deployment.get("name")), str(deployment.get("namespace"))
                )
            except ApiError as exc:
                # The decision depends on it: a DGD that is gone moves the request to DeploymentDeleted.
                if exc.not_found:
                    return DgdSeen(exists=False)
                raise
        status = objects.status(dgd)
        return DgdSeen(
            exists=True, state=str(status.get("state") or ""), waiting_for=str(status.get("waitingFor") or "")
        )

    # --- act --------------------------------------------------------------------------------------

    async def _create_job(self, dgdr: Obj, spec: DynamoGraphDeploymentRequestSpec) -> None:
        body = profiling_job(dgdr, spec, self.options.profiler_image)
        await self.writer.create(JOBS, body, namespace=objects.namespace(dgdr))

    def _start_plan(
        self,
        dgdr: Obj,
        spec: DynamoGraphDeploymentRequestSpec,
        target: Target,
        base: Obj | None,
        model_config: Mapping[str, Any] | None,
    ) -> None:
        key = (objects.uid(dgdr), objects.generation(dgdr) or 1)
        if key in self.plans:
            return
        view_name, namespace = objects.name(dgdr), objects.namespace(dgdr)
        task = asyncio.get_running_loop().create_task(self._plan(dgdr, spec, target, base, model_config))
        self.plans[key] = task
        self.plan_owners[key[0]] = (namespace, view_name)

        def done(_: asyncio.Task[Profile]) -> None:
            if self.controller is not None:
                self.controller.enqueue(Request(namespace or None, view_name))

        task.add_done_callback(done)

    async def _plan(
        self,
        dgdr: Obj,
        spec: DynamoGraphDeploymentRequestSpec,
        target: Target,
        base: Obj | None,
        model_config: Mapping[str, Any] | None,
    ) -> Profile:
        gpu = spec.gpu
        request = PlanRequest(
            model=spec.modelName,
            backend=spec.backend,
            system=target.system,
            isl=spec.sla.isl,
            osl=spec.sla.osl,
            ttft_ms=float(spec.sla.ttft),
            itl_ms=float(spec.sla.itl),
            min_gpus_per_engine=gpu.minNumGPUsPerEngine if gpu else 1,
            # Unset: the latency model's own sizes (AIC's search goes to 16 GPUs for MoE workers).
            max_gpus_per_engine=(
                gpu.maxNumGPUsPerEngine if gpu and "maxNumGPUsPerEngine" in gpu.model_fields_set else None
            ),
            latency_model="auto",
            total_gpus=target.budget,
            partitions_per_gpu=target.partitions_per_gpu,
            model_config=model_config,
        )
        try:
            result = await asyncio.to_thread(self.planner, request)
        except PlannerError as exc:
            return Profile(error=report.cr_message(str(exc)), invalid=True)
        return self._offline_profile(dgdr, spec, target, base, request, result)

    def _offline_profile(
        self,
        dgdr: Obj,
        spec: DynamoGraphDeploymentRequestSpec,
        target: Target,
        base: Obj | None,
        request: PlanRequest,
        result: PlanResult,
    ) -> Profile:
        name = objects.name(dgdr)
        view = RequestView(
            name, objects.namespace(dgdr), objects.generation(dgdr) or 1, False, spec.autoApply, {}
        )
        chosen = result.disagg
        if chosen is None or chosen.prefill is None or chosen.decode is None:
            return Profile(
                error=(
                    f"no disaggregated plan for {spec.modelName} on {target.budget} {target.system} "
                    f"GPUs fits the engine sizes of spec.gpu.minNumGPUsPerEngine {request.min_gpus_per_engine}.."
                    f"spec.gpu.maxNumGPUsPerEngine {request.max_gpus_per_engine or 'default'}"
                )
            )
        graph_plan = GraphPlan(
            backend=spec.backend,
            prefill_tp=chosen.prefill.tp,
            prefill_workers=chosen.prefill.workers,
            decode_tp=chosen.decode.tp,
            decode_workers=chosen.decode.workers,
            ttft_ms=spec.sla.ttft,
            itl_ms=spec.sla.itl,
            gpu_resource=target.resource,
            gpus_per_node=target.per_node,
            profile_configmap=output_name(name),
            prefill_dp=chosen.prefill.dp,
            prefill_ep=chosen.prefill.moe_ep,
            decode_dp=chosen.decode.dp,
            decode_ep=chosen.decode.moe_ep,
        )
        dgd_name, namespace = self._names(view, spec, base)
        try:
            graph = generate_graph(
                base or base_graph(spec.backend, spec.modelName, dgd_name), graph_plan, dgd_name, namespace
            )
        except ValueError as exc:
            return Profile(error=f"spec.profilingConfig.configMapRef: {exc}", invalid=True)
        generated = self._labelled(view, spec, graph)
        sla = "meets the SLA" if chosen.meets_sla else "does NOT meet the SLA (closest plan)"
        message = (
            f"planned {chosen.prefill.workers}x prefill {report.layout(chosen.prefill)} + "
            f"{chosen.decode.workers}x decode {report.layout(chosen.decode)} on {chosen.gpus} of {target.budget} "
            f"{target.system} {'partitions' if target.partitions_per_gpu > 1 else 'GPUs'} "
            f"({result.latency_model} latency model): TTFT {chosen.ttft_ms:.0f} ms, "
            f"ITL {chosen.itl_ms:.1f} ms, {chosen.tokens_per_second_per_gpu:.0f} tokens/s/GPU; {sla}"
        )
        miss = "" if chosen.meets_sla else sla_miss(chosen, spec.sla.ttft, spec.sla.itl)
        self.output_bodies[(objects.uid(dgdr), view.generation)] = output_configmap(
            dgdr, generated, json.dumps(report.to_json(result), indent=1)
        )
        # The Planner service mounts the profile data from a ConfigMap in its own namespace: when the
        # graph goes elsewhere (deploymentOverrides.namespace), a copy goes there too.
        self.output_namespaces[(objects.uid(dgdr), view.generation)] = namespace
        return Profile(
            generated=generated, results=f"configmap/{output_name(name)}", message=message, sla_miss=miss
        )

    async def _write_output(self, dgdr: Obj) -> None:
        key = (objects.uid(dgdr), objects.generation(dgdr) or 1)
        body = self.output_bodies.get(key)
        if body is None:
            return
        namespaces = dict.fromkeys(
            [objects.namespace(dgdr), self.output_namespaces.get(key) or objects.namespace(dgdr)]
        )
        for namespace in namespaces:
            await self._write_output_to(body, namespace)

    async def _write_output_to(self, body: Obj, namespace: str) -> None:
        body = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
        current = self.outputs.get(f"{namespace}/{objects.name(body)}")
        if current is None:
            if await self.writer.create(CONFIGMAPS, body, namespace=namespace) is not None:
                return
            # It exists, the cache does not show it yet: compare with the server's.
            current = await self.client.get(CONFIGMAPS, objects.name(body), namespace)
        if current.get("data") != body["data"]:
            replaced = {
                **body,
                "metadata": {**body["metadata"], "resourceVersion": objects.resource_version(current)},
            }
            await self.writer.replace(CONFIGMAPS, current, replaced)

    async def _create_dgd(self, generated: Mapping[str, Any]) -> None:
        """Create the DGD (no owner reference: it outlives the request); AlreadyExists is fine."""
        namespace = str((generated.get("metadata") or {}).get("namespace") or "")
        await self.writer.create(kinds.DGDS, dict(generated), namespace=namespace)


def sla_miss(plan: Plan, ttft_ms: float, itl_ms: float) -> str:
    """By how much ``plan`` misses each target it misses (the SLAMet condition and Warning Event)."""
    misses = [
        f"{what} {got:.1f} ms against spec.sla.{field} {want:g} ms (+{got / want - 1:.0%})"
        for what, field, got, want in (
            ("TTFT", "ttft", plan.ttft_ms, ttft_ms),
            ("ITL", "itl", plan.itl_ms, itl_ms),
        )
        if got > want
    ]
    return "the best plan misses the SLA: " + ("; ".join(misses) or "no plan meets both targets")


def _labelled_requests(obj: Obj) -> Iterable[Request]:
    labels = objects.labels(obj)
    name, namespace = labels.get(LABEL_DGDR_NAME), labels.get(LABEL_DGDR_NAMESPACE)
    return [Request(namespace or objects.namespace(obj) or None, name)] if name else []


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("nvidia.com", ("dynamographdeploymentrequests",), READ),
    Permission("nvidia.com", ("dynamographdeploymentrequests/status",), ("patch",)),
    Permission("nvidia.com", ("dynamographdeploymentrequests/finalizers",), ("update",)),
    # The generated graph is created once (autoApply) and then left to its owner.
    Permission("nvidia.com", ("dynamographdeployments",), ("get", "list", "watch", "create")),
    # Profiling Jobs; the profiling output and generated-graph ConfigMaps.
    Permission("batch", ("jobs",), ("list", "watch", "create")),
    Permission("", ("configmaps",), ("get", "list", "watch", "create", "update")),
    # GPU inventory for the profiler's search space.
    Permission("", ("nodes",), READ),
    Permission("", ("pods",), READ),
    EVENTS_WRITE,
)


def setup_controller(
    manager: Manager, planner: Planner | None = None, systems: Systems | None = None
) -> Controller:
    informers = manager.informers
    shape = RequestController(
        manager.client,
        informers.informer(kinds.DGDRS),
        informers.informer(JOBS, label_selector="app=dynamo-profiler"),
        informers.informer(CONFIGMAPS, label_selector=LABEL_DGDR_NAME),
        informers.informer(kinds.DGDS, label_selector=LABEL_DGDR_NAME),
        informers.informer(NODES),
        manager.recorder(NAME),
        manager.clock,
        manager.options(DynamoOptions),
        planner,
        systems,
        informers.informer(PODS),
    )
    controller = (
        Controller.build(NAME)
        .for_(kinds.DGDRS)
        .owns(JOBS)
        .watches(CONFIGMAPS, _labelled_requests, label_selector=LABEL_DGDR_NAME)
        .watches(kinds.DGDS, _labelled_requests, label_selector=LABEL_DGDR_NAME)
        .workers(4)
        .reconcile(Shaped(shape, manager.clock))
    )
    shape.controller = controller
    return controller


def setup(manager: Manager) -> None:
    """``aiplane run --controllers dynamographdeploymentrequest`` (also part of ``all``)."""
    manager.add_controller(setup_controller(manager))
