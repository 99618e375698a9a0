"""``aiplane run``'s options: every flag declared once, on the field it fills.

The process's own flags are the fields of :class:`RunOptions`; each controller package's options are a
nested dataclass of their own (:class:`PartitioningOptions`, :class:`DynamoOptions`,
:class:`GangOptions`), declared in that package and handed to the manager as they are. The command
line is generated from these fields (:mod:`aiplane.kube.flags`) in field order, and the options are
built back from what it parsed, so a default, a help text or a flag name exists in one place. Kept
apart from :mod:`aiplane.run` so that the command line can be built without importing the operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aiplane.controllers import registry
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.gang import GangOptions
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.kube.flags import flag, group

__all__ = ["CONTROLLERS_METAVAR", "CONTROLLER_NAMES", "DEFAULT_LEADER_ELECTION_ID", "RunOptions"]

DEFAULT_LEADER_ELECTION_ID: Final = "aiplane-controller-manager"
CONTROLLERS_METAVAR: Final = "NAME[,NAME...]"
#: The names ``--controllers`` accepts, from the registry so the help never goes stale.
CONTROLLER_NAMES: Final = (
    ", ".join(name for name in registry.MODULES if name not in registry.DIAGNOSTIC)
    + f" (diagnostic, only by name: {', '.join(sorted(registry.DIAGNOSTIC))})"
)


@dataclass(frozen=True)
class RunOptions:
    """``aiplane run``'s flags, in the order ``aiplane run --help`` lists them."""

    kubeconfig: Path | None = flag(
        None,
        "--kubeconfig",
        "Kubeconfig; default: in-cluster config in a pod, else $KUBECONFIG or ~/.kube/config.",
        metavar="PATH",
    )
    controllers: str = flag(
        "all",
        "--controllers",
        f"Controllers to run: all, none, or a comma-separated list of {CONTROLLER_NAMES}.",
        metavar=CONTROLLERS_METAVAR,
    )
    leader_elect: bool = flag(False, "--leader-elect", "Elect one active replica through a Lease.")
    leader_election_namespace: str | None = flag(
        None,
        "--leader-election-namespace",
        "Namespace of the Lease; default: the pod's, else the kubeconfig context's.",
        metavar="NAMESPACE",
    )
    leader_election_id: str = flag(
        DEFAULT_LEADER_ELECTION_ID, "--leader-election-id", "Name of the Lease.", metavar="NAME"
    )
    leader_election_lease_duration: float = flag(
        15.0,
        "--leader-election-lease-duration",
        "Seconds a standby waits after the last observed renewal before taking over.",
        metavar="SECONDS",
    )
    leader_election_renew_deadline: float = flag(
        10.0,
        "--leader-election-renew-deadline",
        "Seconds the leader keeps retrying a renewal before giving up leadership.",
        metavar="SECONDS",
    )
    leader_election_retry_period: float = flag(
        2.0,
        "--leader-election-retry-period",
        "Seconds between attempts to acquire or renew.",
        metavar="SECONDS",
    )
    metrics_bind_address: str = flag(
        ":8080",
        "--metrics-bind-address",
        "Address of /metrics, e.g. :8080 or 127.0.0.1:0; 0 disables.",
        metavar="[HOST]:PORT",
    )
    #: /metrics only for bearer tokens the API server authenticates and allows ``get /metrics``.
    metrics_secure: bool = flag(
        True,
        "--metrics-secure/--no-metrics-secure",
        "Serve /metrics only to bearer tokens the API server authenticates (TokenReview) and "
        "allows get on /metrics (SubjectAccessReview), as controller-runtime does by default.",
    )
    health_probe_bind_address: str = flag(
        ":8081",
        "--health-probe-bind-address",
        "Address of /healthz and /readyz, e.g. :8081; 0 disables.",
        metavar="[HOST]:PORT",
    )
    #: ``None``: each controller's documented default (docs/architecture.md).
    max_concurrent_reconciles: int | None = flag(
        None,
        "--max-concurrent-reconciles",
        "Workers per controller (default: each controller's own, docs/architecture.md; "
        "the PartitioningPlan controller always runs one).",
        metavar="N",
        min=1,
    )
    #: Client-side request budget (kube-controller-manager's --kube-api-qps/--kube-api-burst). The
    #: API server's priority and fairness is the real protection; this only stops a runaway loop.
    kube_api_qps: float = flag(
        200.0,
        "--kube-api-qps",
        "Client-side API requests per second (burst above it is --kube-api-burst).",
        metavar="QPS",
        min=1,
    )
    kube_api_burst: int = flag(400, "--kube-api-burst", "Client-side API request burst.", metavar="N", min=1)
    #: Deadline of each non-watch request (0: none); see ``aiplane.kube.client`` (liveness).
    kube_api_request_timeout: float = flag(
        30.0,
        "--kube-api-request-timeout",
        "Deadline of each API request other than a watch (0: none; docs/architecture.md).",
        metavar="SECONDS",
        min=0,
    )
    partitioning: PartitioningOptions = group(PartitioningOptions)
    shutdown_timeout: float = flag(
        30.0,
        "--shutdown-timeout",
        "Seconds in-flight reconciles get to finish after SIGTERM.",
        metavar="SECONDS",
    )
    log_level: str = flag("info", "--log-level", "debug, info, warning or error.", metavar="LEVEL")
    #: Upstream Dynamo operator's flags of the same names (controllers/dynamo/options.py).
    dynamo: DynamoOptions = group(DynamoOptions)
    #: The gang scheduler ModelInfer groups and multinode Dynamo replicas are made for (controllers/gang.py).
    gang: GangOptions = group(GangOptions)
