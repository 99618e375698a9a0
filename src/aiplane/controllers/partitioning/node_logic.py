"""The NodePartitioning state machine: the names its executor uses.

The decisions live in modules named for what they decide, each pure and table- or property-tested:
``views`` (what is observed, read once), ``node_machine`` (:func:`observe`, :func:`decide`, the
resting phases, deletion; its docstring states the executor's contract), ``drain``, ``dcm``,
``verify`` (one step each), ``node_actions`` (what is done to a Node) and ``node_run`` (the working
state of one decision, :class:`NodeLogicConfig`, the ``Decision``).
"""

from __future__ import annotations

from aiplane.controllers.partitioning.node_actions import apply_node_actions
from aiplane.controllers.partitioning.node_machine import decide, observe
from aiplane.controllers.partitioning.node_run import NodeLogicConfig
from aiplane.controllers.partitioning.vocabulary import DCM_EVENT_SOURCE, FINALIZER

__all__ = ["DCM_EVENT_SOURCE", "FINALIZER", "NodeLogicConfig", "apply_node_actions", "decide", "observe"]
