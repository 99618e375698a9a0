"""The one controller shape: observe from the cache → decide (pure) → act → report.

Every controller of ours is written as a :class:`Shape` and run by :class:`Shaped`, so that the same
four steps happen in the same order everywhere and the decision can be tested without a cluster:

* ``observe(request)`` reads what the decision needs from the informers' caches (an executor that
  must not act on a stale view, such as a drain about to evict, may LIST a few objects here), and
  returns ``None`` when there is nothing to reconcile (the object is gone);
* ``decide(observed, now)`` is a pure function of the observation and the injected clock's time: it
  returns a typed decision (the children to create, replace or delete, the status wanted, what to
  wait for), and writes nothing;
* ``act(observed, decision)`` carries out the decision's writes through the shared
  :class:`~aiplane.kube.children.ChildWriter` (fewest writes: only what differs);
* ``report(observed, decision)`` writes the status through the shared
  :class:`~aiplane.kube.status.StatusWriter` when it changed, emits the transition Events, and says
  when to look again.

This is controller-runtime's ``Reconciler`` split at the two seams every well-kept controller keeps
anyway (kueue's ``pkg/workload`` mutators and lws's pure ``rollingUpdatePartition`` are examples):
what to do is decided before anything is done, and status reports what was decided.
"""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Protocol, TypeVar

from aiplane.kube.clock import Clock
from aiplane.kube.controller import Request, Result
from aiplane.kube.events import EventRecorder

__all__ = ["Shape", "Shaped"]

ObservedT = TypeVar("ObservedT")
DecisionT = TypeVar("DecisionT")


class Shape(Protocol[ObservedT, DecisionT]):
    """A controller's four steps (see the module docstring)."""

    #: Where this controller's Events go (the manager's recorder for its name).
    recorder: EventRecorder

    async def observe(self, request: Request) -> ObservedT | None: ...

    def decide(self, observed: ObservedT, now: datetime) -> DecisionT: ...

    async def act(self, observed: ObservedT, decision: DecisionT) -> None: ...

    async def report(self, observed: ObservedT, decision: DecisionT) -> Result | None: ...


class Shaped(Generic[ObservedT, DecisionT]):
    """The reconcile function of a :class:`Shape`: the runtime calls it with each request."""

    def __init__(self, shape: Shape[ObservedT, DecisionT], clock: Clock) -> None:
        self.shape = shape
        self.clock = clock

    @property
    def recorder(self) -> EventRecorder:
        return self.shape.recorder

    async def __call__(self, request: Request) -> Result | None:
        observed = await self.shape.observe(request)
        if observed is None:
            return None
        decision = self.shape.decide(observed, self.clock.now())
        await self.shape.act(observed, decision)
        return await self.shape.report(observed, decision)
