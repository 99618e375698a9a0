"""JSON-lines logging for operators: structlog, bound to controller, key and reconcile id.

Operators run unattended; their logs are read by machines first (Loki, Elasticsearch, ``kubectl logs
| jq``) and by people hunting one object's history second. So every line is one JSON object on
stderr with zap's field names, which is what controller-runtime operators print::

    {"ts": "2026-01-01T00:00:00.123456Z", "level": "info", "logger": "aiplane.controller",
     "msg": "Reconcile done", "controller": "echo", "key": "default/a", "reconcile_id": "…"}

* :func:`configure_logging` sets this up once per process (``aiplane run`` calls it), including the
  standard library's ``logging`` (aiohttp, kubernetes_asyncio), so nothing prints plain text.
* :func:`get_logger` returns a structlog logger; ``logger=`` names it.
* :func:`bind_controller` and :func:`reconcile_context` bind ``controller``, ``key`` and a fresh
  ``reconcile_id`` (a uuid4, controller-runtime's ``reconcileID``) in :mod:`contextvars`. Every log
  call made inside — including in nested functions and in tasks created inside, which copy the
  context — carries them without passing a logger around, and nothing leaks between workers
  because each worker is its own task with its own context. The controller wraps each reconcile::

      with reconcile_context(controller=name, key=key):
          log.info("Reconciling")          # has controller, key, reconcile_id
          await reconcile(request)

* :func:`redact_secrets` is a processor that replaces the values of keys named ``data``,
  ``stringData`` or containing ``token``, ``password``, ``secret`` or ``authorization`` (case
  insensitive), at any depth of any logged value, with ``"<redacted>"``: logging a Secret (or a
  kubeconfig, or an HTTP header dict) must never put credentials into a log store. It copies
  what it changes and never mutates the logged object, which may be a shared informer-cache
  object. It is in the default processor chain.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Final, TextIO

import orjson
import structlog
from structlog.contextvars import bind_contextvars, bound_contextvars, get_contextvars, reset_contextvars
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = [
    "REDACTED",
    "bind_controller",
    "configure_logging",
    "current_reconcile_id",
    "get_logger",
    "reconcile_context",
    "redact_secrets",
]

REDACTED: Final = "<redacted>"
_HANDLER_NAME: Final = "aiplane-json"

_EXACT_SENSITIVE: Final = frozenset({"data", "stringdata"})
_SENSITIVE_PART: Final = re.compile(r"token|password|passwd|secret|authorization", re.IGNORECASE)
_MAX_DEPTH: Final = 32
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def _sensitive(key: object) -> bool:
    if not isinstance(key, str):
        return False
    return key.lower() in _EXACT_SENSITIVE or _SENSITIVE_PART.search(key) is not None


def _redacted_value(value: Any) -> Any:
    """Keep the shape (a Secret's data keys are useful and not secret), drop every value."""
    if isinstance(value, Mapping):
        return dict.fromkeys(value, REDACTED)
    return REDACTED


def _scrub(value: Any, depth: int = 0) -> Any:
    """``value`` with sensitive entries redacted; the same object when nothing needed changing."""
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new = _redacted_value(item) if _sensitive(key) else _scrub(item, depth + 1)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [_scrub(item, depth + 1) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact credentials in every field of the event (see the module docstring)."""
    for key in list(event_dict):
        if key == "event":
            continue
        value = event_dict[key]
        event_dict[key] = _redacted_value(value) if _sensitive(key) else _scrub(value)
    return event_dict


_LEADING_KEYS: Final = ("ts", "level", "logger", "msg")


def _leading_keys_first(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """zap's field order (ts, level, logger, msg, then the rest): lines read well unparsed too."""
    ordered = {key: event_dict[key] for key in _LEADING_KEYS if key in event_dict}
    ordered.update((key, value) for key, value in event_dict.items() if key not in ordered)
    return ordered


def _orjson_dumps(obj: Any, **_: Any) -> str:
    return orjson.dumps(obj, default=repr).decode()


def _pre_chain() -> list[Processor]:
    """What every event goes through before rendering, structlog's and the standard library's alike."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="%Y-%m-%dT%H:%M:%S.%fZ", utc=True, key="ts"),
        redact_secrets,
        structlog.processors.StackInfoRenderer(),
    ]


def configure_logging(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library to write JSON lines to ``stream`` (stderr).

    structlog events are handed to the standard library's ``logging`` (so a logger's name,
    ``structlog.get_logger("aiplane.controller")``, becomes the ``logger`` field) and one handler
    renders everything, so aiohttp's and kubernetes_asyncio's records carry the bound context and
    are redacted too. ``level`` (``debug``, ``info``, ``warning``, ``error``) applies to aiplane's
    loggers; other libraries stay at ``info`` or above, as their debug output is not ours to turn
    on. Idempotent: a second call replaces the first's handler.
    """
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; expected one of {sorted(_LEVELS)}")
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_pre_chain(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_pre_chain(),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.EventRenamer("msg"),
                _leading_keys_first,
                structlog.processors.JSONRenderer(serializer=_orjson_dumps),
            ],
        )
    )
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.INFO))
    logging.getLogger("aiplane").setLevel(numeric)
    # aiohttp's access log is one line per probe and scrape: noise at info.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def get_logger(name: str = "aiplane", **initial: Any) -> Any:
    """A structlog logger named ``name`` (the ``logger`` field), with ``initial`` fields bound.

    Without ``initial`` it is a lazy proxy, so a module-level logger picks up
    :func:`configure_logging` even when that runs after the import.
    """
    logger = structlog.get_logger(name)
    return logger.bind(**initial) if initial else logger


@contextlib.contextmanager
def bind_controller(controller: str) -> Iterator[None]:
    """Bind ``controller`` for everything logged inside (a controller's run loop, its workers)."""
    with bound_contextvars(controller=controller):
        yield


@contextlib.contextmanager
def reconcile_context(
    *, controller: str | None = None, key: str, reconcile_id: str | None = None
) -> Iterator[str]:
    """Bind ``key`` and a fresh ``reconcile_id`` (and ``controller`` if given) for one reconcile.

    Yields the reconcile id, which the controller may also put into Events or error messages so
    one reconcile can be found across logs. Exiting restores the previous bindings, so a worker
    that processes many keys never carries a stale key into the next one.
    """
    rid = reconcile_id or str(uuid.uuid4())
    fields: dict[str, Any] = {"key": key, "reconcile_id": rid}
    if controller is not None:
        fields["controller"] = controller
    # Set and reset by token: structlog's bound_contextvars reads every bound variable to save and
    # restore them, a cost paid on every reconcile (the runtime benchmark's hot path).
    tokens = bind_contextvars(**fields)
    try:
        yield rid
    finally:
        reset_contextvars(**tokens)


def current_reconcile_id() -> str | None:
    """The ``reconcile_id`` bound in this context, if any."""
    value = get_contextvars().get("reconcile_id")
    return value if isinstance(value, str) else None
