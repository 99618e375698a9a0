"""PLACEHOLDER — replaced at merge by the real multinode injection (another helper's module).

Only the interface is real here: the DCD controller calls :func:`multinode_templates` for each
LeaderWorkerSet it builds. This placeholder returns two unchanged deep copies of the pod template.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MultinodeInput:
    backend: str | None  # "vllm" | "sglang" | "trtllm" | None
    node_count: int
    gpus_per_node: int  # the main container's GPU limit
    ssh_secret: str  # DynamoOptions.mpi_ssh_secret


def multinode_templates(
    pod_template: dict[str, Any], inp: MultinodeInput
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(leader_template, worker_template) for a LeaderWorkerSet; raises ValueError naming a field."""
    return copy.deepcopy(pod_template), copy.deepcopy(pod_template)
