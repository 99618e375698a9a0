"""Loaded by the operator process (``AIPLANE_EXTRA_CONTROLLERS``) in the network campaigns: shorter
liveness bounds, so that a black-holed watch is noticed in seconds, not the production 45/90 s.

Listed first in ``--controllers`` so that it runs before any controller creates an informer (the
bounds apply to informers created after they are set). The read deadline stays well below the
staleness bound (``harness.PROXIED_LIVENESS``), so a quiet watch, re-opened at each deadline, never
makes an informer stale while the server answers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiplane.kube.manager import Manager

NAME = "chaosliveness"
IDLE_ENV = "AIPLANE_CHAOS_WATCH_IDLE_TIMEOUT"
STALE_ENV = "AIPLANE_CHAOS_STALE_AFTER"


def setup_liveness(manager: Manager) -> None:
    manager.watch_idle_timeout = float(os.environ[IDLE_ENV])
    manager.stale_after = float(os.environ[STALE_ENV])
