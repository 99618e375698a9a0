"""The ``aiplane`` command line."""

from __future__ import annotations

import asyncio
import enum
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from aiplane.api.packaged import examples_dir
from aiplane.clibase import Command, Group, PipeConsole, flag_signature, version_callback
from aiplane.run_options import CONTROLLER_NAMES, CONTROLLERS_METAVAR, RunOptions

app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    # Plain help: rich's option table cuts long option names at 80 columns ("--leader-election…" five
    # times over), so a user could not tell them apart.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="aiplane: the control plane of a GPU inference cluster (operators, CRDs, embedded cluster).",
)
#: How long the simulated DCM takes to partition a node, for ``aiplane sim`` and ``aiplane demo`` alike
#: (and the embedded cluster's own default, docs/sim.md).
SIM_DCM_DELAY = 1.0
#: The terminal's own width (the demo's tables fit it, demo.common.fit); in a pipe, $COLUMNS when set,
#: else no wrapping at all: a log or a grep gets whole lines, never a table cut to a guessed width.
console = Console() if sys.stdout.isatty() or "COLUMNS" in os.environ else PipeConsole()
err_console = Console(stderr=True)
_EXAMPLES = examples_dir()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """aiplane: the control plane of a GPU inference cluster (operators, CRDs, embedded cluster)."""


class AuthorizationMode(enum.StrEnum):
    """``aiplane sim --authorization-mode`` (kube-apiserver's names)."""

    ALWAYS_ALLOW = "AlwaysAllow"
    RBAC = "RBAC"


@app.command(cls=Command)
def crds(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="DIR", help="Write one file per CRD into this directory."),
    ] = None,
) -> None:
    """Print every CRD as a YAML stream (or write them to --output DIR)."""
    from aiplane.api.crdgen import all_crds, crd_filename, to_yaml

    generated = all_crds()
    if output is None:
        sys.stdout.write("---\n".join(to_yaml(crd) for crd in generated))
        return
    output.mkdir(parents=True, exist_ok=True)
    for crd in generated:
        (output / crd_filename(crd)).write_text(to_yaml(crd), encoding="utf-8")
    err_console.print(f"wrote {len(generated)} CRDs to {output}")


@app.command(cls=Command)
def rbac(
    controllers: Annotated[
        str,
        typer.Option(
            metavar=CONTROLLERS_METAVAR,
            help=f"Controllers whose needs to grant: all, or a comma-separated list of {CONTROLLER_NAMES}.",
        ),
    ] = "all",
    name: Annotated[str, typer.Option(metavar="NAME", help="Name of the ClusterRole.")] = "aiplane-manager",
) -> None:
    """Print the ClusterRole the selected controllers need, from what each declares (its PERMISSIONS).

    The Helm chart's ClusterRole is this output (a test keeps them equal); docs/install.md says what
    each rule is for.
    """
    import yaml

    from aiplane.controllers import registry
    from aiplane.kube.rbac import METRICS_AUTH, cluster_role

    names = None if controllers.strip() == "all" else [n.strip() for n in controllers.split(",") if n.strip()]
    try:
        declared = registry.permissions(names)
    except registry.UnknownControllerError as exc:
        err_console.print(f"aiplane rbac: {exc}", markup=False)
        raise typer.Exit(2) from None
    declared_all = [p for perms in declared.values() for p in perms]
    role = cluster_role(name, [*declared_all, *METRICS_AUTH])
    sys.stdout.write(yaml.safe_dump(role, sort_keys=False))


@app.command(cls=Command)
def validate(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Manifest files (multi-document YAML), or directories of them (not recursive).",
        ),
    ],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems.")] = False,
) -> None:
    """Check manifests against the CRD schemas and CEL rules (and built-in kinds against Kubernetes 1.37),
    then with the checks our controllers run on what the schema lets through (a DGD's names, a
    ModelInfer's roles and gang).

    Exit status 1 if any document is invalid; each problem names file#document, object, field path and rule.
    """
    from aiplane.api.manifests import check_file, manifest_files
    from aiplane.controllers.spec_checks import spec_problems

    bad = 0
    total = 0
    for path in (found for given in files for found in manifest_files(given)):
        for checked in check_file(path, spec_problems):
            total += 1
            if checked.problems:
                bad += 1
                for problem in checked.problems:
                    typer.echo(str(problem))
            elif not quiet:
                typer.echo(f"{checked.file}#{checked.document} {checked.object}: valid")
    if not quiet or bad:
        typer.echo(f"{total - bad} valid, {bad} invalid")
    raise typer.Exit(1 if bad else 0)


@app.command(cls=Command)
def demo(
    examples: Annotated[
        Path,
        typer.Option(
            metavar="DIR",
            help="Directory of example manifests (default: ./examples, else the packaged ones).",
        ),
    ] = _EXAMPLES,
    kubeconfig: Annotated[
        Path, typer.Option(metavar="PATH", help="Where to write the embedded cluster's kubeconfig.")
    ] = Path("/tmp/aiplane-demo.kubeconfig"),
    log_file: Annotated[
        Path,
        typer.Option(
            metavar="PATH", help="Where the operator's JSON logs go (they would tear the live view)."
        ),
    ] = Path("/tmp/aiplane-demo.log"),
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the cluster running after the demo (Ctrl-C stops it).")
    ] = False,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="Seconds each section may take.")] = 300.0,
    dcm_delay: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds the simulated DCM takes to partition a node.")
    ] = SIM_DCM_DELAY,
    pod_ready_delay: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds a started pod takes to become Ready.")
    ] = 2.0,
    plugin_refresh_delay: Annotated[
        float,
        typer.Option(metavar="SECONDS", help="Seconds the device plugin takes to publish new partitions."),
    ] = 1.0,
    quiet_seconds: Annotated[
        float,
        typer.Option(
            metavar="SECONDS", help="Seconds to count operator writes after convergence (should stay 0)."
        ),
    ] = 3.0,
    real: Annotated[
        bool,
        typer.Option(
            "--real",
            help="On a real control plane instead (etcd, kube-apiserver, controller-manager, scheduler, kwok "
            "nodes; built by scripts/build-kube, cached): sections it cannot host yet are skipped and say why.",
        ),
    ] = False,
) -> None:
    """Run the operator on the embedded cluster, live: the example partition profiles and plan roll CPX
    across the MI300X inference nodes under the plan's limits; the example 1P2D ModelInfer comes up on
    that pool, gang-scheduled, and an image change rolls out; then the plan takes the pool back to SPX
    under the serving ModelInfer, its floor (replicas - maxUnavailable groups) measured on every pod
    change; then the Dynamo graph and the SLA-driven request. A summary after each.

    Exit status 0 when every section converged cleanly, 1 otherwise.
    """
    from aiplane.api.manifests import check_file
    from aiplane.demo.common import DemoOptions
    from aiplane.demo.run import run_demo

    if min(timeout, dcm_delay, pod_ready_delay, plugin_refresh_delay, quiet_seconds) < 0:
        err_console.print("aiplane demo: durations must not be negative")
        raise typer.Exit(2)
    files = sorted(examples.glob("*.yaml"))
    if not files:
        err_console.print(f"aiplane demo: no example manifests in {examples}/ (run it from the checkout)")
        raise typer.Exit(2)
    results = [checked for path in files for checked in check_file(path)]
    invalid = [c for c in results if c.problems]
    for checked in invalid:
        for problem in checked.problems:
            err_console.print(str(problem))
    console.print(
        f"{len(results) - len(invalid)} of {len(results)} example objects in {examples}/ are valid "
        "against the CRD schemas and CEL rules ([bold]aiplane api[/] lists the CRDs)."
    )
    if invalid:
        raise typer.Exit(1)
    options = DemoOptions(
        examples=examples,
        kubeconfig=kubeconfig,
        log_file=log_file,
        keep=keep,
        timeout=timeout,
        dcm_delay=dcm_delay,
        pod_ready_delay=pod_ready_delay,
        plugin_refresh_delay=plugin_refresh_delay,
        quiet_seconds=quiet_seconds,
        real=real,
    )
    raise typer.Exit(asyncio.run(run_demo(options, console)))


@app.command(cls=Command)
def api(
    examples: Annotated[
        Path,
        typer.Option(
            metavar="DIR",
            help="Directory of example manifests (default: ./examples, else the packaged ones).",
        ),
    ] = _EXAMPLES,
) -> None:
    """Show what aiplane serves: every CRD with its names and columns, then validate the examples."""
    from aiplane.api.crdgen import crd_for
    from aiplane.api.manifests import check_file
    from aiplane.api.registry import RESOURCES

    table = Table(title="Custom resources served by aiplane")
    for column in ("Kind", "Group/Version", "Scope", "Short names", "Subresources", "kubectl get columns"):
        table.add_column(column, overflow="fold")
    for model in RESOURCES:
        crd = crd_for(model)
        version = crd["spec"]["versions"][0]
        info = model.crd
        table.add_row(
            info.kind,
            info.api_version,
            info.scope,
            ", ".join(info.short_names),
            ", ".join(sorted(version.get("subresources", {}))),
            ", ".join(c["name"] for c in version.get("additionalPrinterColumns", [])),
        )
    console.print(table)
    files = sorted(examples.glob("*.yaml"))
    results = [checked for path in files for checked in check_file(path)]
    invalid = [c for c in results if c.problems]
    examples_table = Table(title=f"Examples in {examples}/")
    for column in ("File", "#", "Object", "Result"):
        examples_table.add_column(column)
    for checked in results:
        verdict = (
            "[green]valid[/]"
            if not checked.problems
            else "[red]" + "; ".join(p.message for p in checked.problems)
        )
        examples_table.add_row(Path(checked.file).name, str(checked.document), checked.object, verdict)
    console.print(examples_table)
    console.print(
        "Next: install the CRDs with [bold]kubectl apply --server-side -f deploy/crds/[/] "
        "or check your own manifests with [bold]aiplane validate FILE...[/]"
    )
    raise typer.Exit(1 if invalid else 0)


@app.command(cls=Command)
def sim(
    kubeconfig: Annotated[
        Path, typer.Option(metavar="PATH", help="Where to write the kubeconfig (atomically, once serving).")
    ],
    port: Annotated[int, typer.Option(metavar="PORT", help="Port on 127.0.0.1; 0 picks a free one.")] = 0,
    fleet: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="Fleet file (node pools); default: a small mixed fleet."),
    ] = None,
    controllers: Annotated[
        str,
        typer.Option(
            metavar=CONTROLLERS_METAVAR,
            help=f"Controllers to run in-process: all, none, or a comma-separated list of {CONTROLLER_NAMES}.",
        ),
    ] = "all",
    fault: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SPEC",
            help="Inject a fault, e.g. 'verb=patch,resource=pods,error=500,count=3' (repeatable).",
        ),
    ] = None,
    agents: Annotated[
        bool,
        typer.Option(
            "--agents/--no-agents",
            help="Run the simulated kubelet, DaemonSet controller and AMD GPU operator (DCM, device plugin).",
        ),
    ] = True,
    hardware: Annotated[
        bool,
        typer.Option(
            "--hardware/--no-hardware",
            help="With the agents, run the simulated AMD GPU operator in-process; --no-hardware leaves "
            "it to `aiplane hardware --kubeconfig PATH` (out of process, as beside a real control plane).",
        ),
    ] = True,
    dcm_delay: Annotated[
        float,
        typer.Option(
            "--dcm-delay", metavar="SECONDS", help="Seconds the simulated DCM takes to partition a node."
        ),
    ] = SIM_DCM_DELAY,
    pod_ready_delay: Annotated[
        float,
        typer.Option(
            "--pod-ready-delay",
            metavar="SECONDS",
            help="How long a bound pod takes to become Running and Ready.",
        ),
    ] = 0.5,
    authorization_mode: Annotated[
        AuthorizationMode,
        typer.Option(
            "--authorization-mode",
            metavar="MODE",
            help="AlwaysAllow: every authenticated request may do everything. RBAC: authorize every "
            "request by Roles, ClusterRoles and their bindings, as kube-apiserver does.",
        ),
    ] = AuthorizationMode.ALWAYS_ALLOW,
    audit_log: Annotated[
        Path | None,
        typer.Option(
            "--audit-log",
            metavar="PATH",
            help="Append one JSON line per request (kube's audit Event) to PATH.",
        ),
    ] = None,
) -> None:
    """Run the embedded cluster (a Kubernetes API server faithful enough for kubectl) until SIGINT/SIGTERM."""
    from aiplane.simrun import run_sim

    code = asyncio.run(
        run_sim(
            kubeconfig=kubeconfig,
            port=port,
            fleet_file=fleet,
            controllers=controllers,
            faults=fault or [],
            agents=agents,
            hardware=hardware,
            dcm_delay=dcm_delay,
            pod_ready_delay=pod_ready_delay,
            authorization_mode=authorization_mode.value,
            audit_log=audit_log,
        )
    )
    raise typer.Exit(code)


@app.command(cls=Command)
def hardware(
    kubeconfig: Annotated[
        Path | None, typer.Option(metavar="PATH", help="Kubeconfig; default: $KUBECONFIG or ~/.kube/config.")
    ] = None,
    fleet: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="Fleet file: first create its missing Nodes, as aiplane sim does."),
    ] = None,
    dcm_delay: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds the simulated DCM takes to partition a node.")
    ] = SIM_DCM_DELAY,
    plugin_refresh_delay: Annotated[
        float,
        typer.Option(metavar="SECONDS", help="Seconds before a node shows a (re)started plugin's devices."),
    ] = 0.0,
    metrics_address: Annotated[
        str, typer.Option(metavar="HOST:PORT", help="The GPU metrics exporter's /metrics and /utilization.")
    ] = "127.0.0.1:0",
    amd: Annotated[
        bool, typer.Option(help="Run the simulated AMD GPU operator (DCM, device plugin).")
    ] = True,
) -> None:
    """Run the simulated hardware (AMD GPU operator, GPU metrics exporter) against any cluster until SIGINT/SIGTERM."""
    from aiplane.sim.hardware.command import run_hardware

    options = {"dcm_delay": dcm_delay, "plugin_refresh_delay": plugin_refresh_delay}
    code = asyncio.run(
        run_hardware(
            kubeconfig=kubeconfig, fleet_file=fleet, metrics_address=metrics_address, amd=amd, **options
        )
    )
    raise typer.Exit(code)


def _run(**flags: Any) -> None:
    """Run the operator: a manager with the selected controllers, until SIGTERM.

    Exit status 0 after SIGTERM and a clean drain, 1 when leadership is lost or the manager fails,
    2 for invalid flags or configuration.
    """
    from aiplane.run import main_from_flags

    raise typer.Exit(main_from_flags(flags))


#: ``aiplane run``'s parameters are generated from the options dataclasses (aiplane.run_options).
_run.__signature__ = flag_signature(RunOptions)  # type: ignore[attr-defined]
_run.__annotations__ = {p.name: p.annotation for p in _run.__signature__.parameters.values()}  # type: ignore[attr-defined]
app.command("run", cls=Command)(_run)


@app.command(cls=Command)
def plan(
    model: Annotated[
        str,
        typer.Option(metavar="MODEL", help="Hugging Face ID (e.g. Qwen/Qwen3-32B-FP8) or AIC model name."),
    ],
    system: Annotated[
        str,
        typer.Option(
            metavar="SYSTEM", help="GPU system: h100, h200, a100, b200, gb200, mi300x, mi325x, mi355x."
        ),
    ],
    isl: Annotated[int, typer.Option(metavar="TOKENS", help="Input (prompt) tokens per request.", min=1)],
    osl: Annotated[int, typer.Option(metavar="TOKENS", help="Output tokens per request.", min=2)],
    ttft: Annotated[float, typer.Option(metavar="MS", help="Time-to-first-token target, ms.", min=0.001)],
    itl: Annotated[float, typer.Option(metavar="MS", help="Inter-token latency target, ms.", min=0.001)],
    backend: Annotated[str, typer.Option(metavar="BACKEND", help="vllm, sglang or trtllm.")],
    total_gpus: Annotated[
        int | None, typer.Option(metavar="N", help="GPU budget of the whole deployment.", min=1)
    ] = None,
    min_gpus_per_engine: Annotated[
        int, typer.Option(metavar="N", help="Smallest engine (TP) size.", min=1)
    ] = 1,
    max_gpus_per_engine: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Largest engine size in GPUs (default: aic searches AIC's sizes, builtin one node).",
            min=1,
        ),
    ] = None,
    partitions_per_gpu: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="AMD compute partitions per GPU (CPX on MI300X: 8); GPU counts are then partitions.",
        ),
    ] = 1,
    model_config: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="The model's Hugging Face config.json, or its directory (for models the registry lacks).",
        ),
    ] = None,
    latency_model: Annotated[
        str,
        typer.Option(
            metavar="auto|aic|builtin",
            help="auto: AIConfigurator's measured engine where it has data for the model, system and "
            "backend, else builtin (analytic).",
        ),
    ] = "auto",
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="table|json", help="table or json.")
    ] = "table",
) -> None:
    """Size disaggregated serving within TTFT/ITL targets (AIConfigurator's search, in process).

    Exit status 0 when a plan meets the SLA, 3 when only a best-effort plan exists, 2 for bad input.
    """
    import gc
    import json

    from aiplane.planner import report

    gc.disable()  # one plan, then exit: collecting AIC's import-time objects cost ~0.1 s, freed nothing
    from aiplane.planner.api import plan as run_plan
    from aiplane.planner.types import PlannerError, PlanRequest

    def bad(message: str) -> typer.Exit:
        err_console.print(f"aiplane plan: {message}", markup=False)
        return typer.Exit(report.EXIT_BAD_INPUT)

    if output not in ("table", "json"):
        raise bad(f"--output: must be table or json (got {output!r})")
    config = None
    if model_config is not None:
        if model_config.is_dir():  # a downloaded checkpoint's directory
            model_config = model_config / "config.json"
        try:
            config = json.loads(model_config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise bad(f"--model-config: cannot read {model_config} as JSON: {err}") from None
        if not isinstance(config, dict):
            raise bad(f"--model-config: {model_config} must hold a JSON object (a config.json)")
    request = PlanRequest(
        model=model,
        backend=backend,  # type: ignore[arg-type]  # checked by plan()
        system=system,
        isl=isl,
        osl=osl,
        ttft_ms=ttft,
        itl_ms=itl,
        min_gpus_per_engine=min_gpus_per_engine,
        max_gpus_per_engine=max_gpus_per_engine,
        total_gpus=total_gpus,
        partitions_per_gpu=partitions_per_gpu,
        latency_model=latency_model,  # type: ignore[arg-type]  # checked by plan()
        model_config=config,
    )
    try:
        result = run_plan(request)
    except PlannerError as err:
        raise bad(report.flag_message(str(err))) from None
    if output == "json":
        sys.stdout.write(json.dumps(report.to_json(result), indent=2) + "\n")
    else:
        budget = (
            f"{result.total_gpus} GPUs"
            if result.total_gpus is not None
            else "no --total-gpus: one replica sized, GPUs as needed"
        )
        table = Table(
            title=f"{result.model} on {result.system} ({result.backend}, {result.latency_model} latencies, "
            f"budget {budget})"
        )
        for column in (
            "plan",
            "engines",
            "GPUs",
            "tok/s/GPU",
            "tok/s/user",
            "TTFT ms",
            "ITL ms",
            "meets SLA",
        ):
            table.add_column(column)
        for row in report.plan_rows(result):
            table.add_row(*row)
        console.print(table)
        if result.frontier:
            front = Table(title="Pareto frontier (disaggregated)")
            front.add_column("tok/s/user", justify="right")
            front.add_column("tok/s/GPU", justify="right")
            for row in report.frontier_rows(result):
                front.add_row(*row)
            console.print(front)
    raise typer.Exit(report.exit_code(result))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
