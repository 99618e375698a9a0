"""What "settled" means before a test counts the operator's writes at rest."""

from __future__ import annotations

from aiplane.kube.events import EventRecorder
from aiplane.kube.manager import Manager


async def events_written(manager: Manager) -> None:
    """Wait for the Events the manager's controllers have scheduled. An Event is written after the
    status write it reports (as client-go's broadcaster does), so a transition just seen in status
    may still have its Event on the way: it belongs to the change, not to rest."""
    for shared in manager.recorders:
        await shared.flush()
    for controller in manager.controllers:
        for recorder in (controller.recorder, getattr(controller.reconciler, "recorder", None)):
            if isinstance(recorder, EventRecorder):
                await recorder.flush()
