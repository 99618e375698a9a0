"""The scheduler profiles of the local control plane: kube-scheduler's default profile and the
scheduler-plugins scheduler's Coscheduling profile (``cluster up --with coscheduling``), both packing GPUs.

GPU packing: kube's default scoring spreads pods (``NodeResourcesBalancedAllocation`` and the system-default
``PodTopologySpread`` constraints) and weighs only CPU and memory, so GPU pods of mixed sizes are placed one
at a time with no regard to the GPUs they leave: 1- and 2-GPU workers that fill every GPU of two nodes can
end with one free GPU on each and a 2-GPU worker Unschedulable. GPU clusters pack instead (kube's "resource
bin packing": ``NodeResourcesFit`` with ``MostAllocated`` over the GPU resources), so a node's GPUs are
filled before the next node's are touched. A gang scheduler needs it as much: a gang that fits only on
whole nodes finds them only if smaller pods did not scatter over every node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

#: The scheduler name of the scheduler-plugins scheduler's profile: its Helm chart's default
#: (kubernetes-sigs/scheduler-plugins, manifests/install/charts/as-a-second-scheduler/values.yaml).
COSCHEDULING_SCHEDULER_NAME: Final = "scheduler-plugins-scheduler"
#: How long the gang scheduler leaves a pod it could not place before trying it again unprompted
#: (``--pod-max-in-unschedulable-pods-duration``; kube's default is 5 min).
UNSCHEDULABLE_FLUSH_SECONDS: Final = 30
#: How often kube-scheduler moves the pods that have waited that long back to its active queue
#: (``flushUnschedulablePodsLeftover``, every 30 s: kubernetes pkg/scheduler/backend/queue).
UNSCHEDULABLE_FLUSH_PERIOD_SECONDS: Final = 30
#: How long the Coscheduling plugin keeps a gang's placed members waiting at Permit for the rest.
#: At least the longest a rejected member can wait for the flush: Kueue ungates a gang's replacement
#: pods one reconcile apart, the plugin turns the first down while its sibling is gated and is not
#: told of the ungating (a Pod update), so the first comes back only with the flush while the second
#: waits at Permit. With a shorter wait (upstream's chart sets 10 s) the second timed out first, the
#: two came back at different flushes and turned each other down at every flush after that: a gang
#: member deleted under Kueue stayed Pending for good about one time in three. The plugin's own
#: default is 60 s.
PERMIT_WAITING_SECONDS: Final = UNSCHEDULABLE_FLUSH_SECONDS + UNSCHEDULABLE_FLUSH_PERIOD_SECONDS


def _gpu_packing() -> dict[str, Any]:
    return {
        "name": "NodeResourcesFit",
        "args": {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "nvidia.com/gpu", "weight": 1}, {"name": "amd.com/gpu", "weight": 1}],
            }
        },
    }


def _config(kubeconfig: Path, profile: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }


def scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """kube-scheduler's configuration: the default profile, packing GPUs."""
    return _config(
        kubeconfig,
        {
            "schedulerName": "default-scheduler",
            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            "pluginConfig": [
                _gpu_packing(),
                {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
            ],
        },
    )


def coscheduling_config(
    kubeconfig: Path, scheduler_name: str = COSCHEDULING_SCHEDULER_NAME
) -> dict[str, Any]:
    """The scheduler-plugins scheduler's configuration: upstream's Coscheduling profile
    (manifests/coscheduling/scheduler-config.yaml: Coscheduling at every extension point and as the only
    queue sort) under its own scheduler name, beside kube-scheduler, packing GPUs like kube-scheduler's."""
    return _config(
        kubeconfig,
        {
            "schedulerName": scheduler_name,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]},
            },
            "pluginConfig": [
                {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": PERMIT_WAITING_SECONDS}},
                _gpu_packing(),
                {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
            ],
        },
    )
