"""The delays a controller's work queue schedules, read where they are scheduled.

Wall-clock gaps between retries only bound the backoff from below: a loaded machine stretches every
gap, the 5 ms one most, so a test comparing gaps with each other fails under load.
"""

from __future__ import annotations

from aiplane.kube.controller import Controller, Request


def scheduled_delays(controller: Controller) -> list[float]:
    """A list that fills with every delay ``controller``'s queue is asked to wait before a retry."""
    delays: list[float] = []
    schedule = controller.queue.add_after

    def recording(item: Request, delay: float) -> None:
        delays.append(delay)
        schedule(item, delay)

    controller.queue.add_after = recording  # type: ignore[method-assign]
    return delays
