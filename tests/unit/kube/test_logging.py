"""JSON-lines logging: zap's fields, context bound per reconcile, secrets never written."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from aiplane.kube.logging import (
    REDACTED,
    bind_controller,
    configure_logging,
    current_reconcile_id,
    get_logger,
    reconcile_context,
)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = {name: logging.getLogger(name).level for name in ("", "aiplane", "aiohttp.access")}
    out = io.StringIO()
    configure_logging("debug", stream=out)
    yield out
    structlog.reset_defaults()
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    for handler in list(root.handlers):
        if handler.get_name() == "aiplane-json":
            root.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_every_line_is_json_with_zaps_leading_fields(stream: io.StringIO) -> None:
    get_logger("aiplane.test").info("hello", answer=42)
    [line] = lines(stream)
    assert list(line)[:4] == ["ts", "level", "logger", "msg"]
    assert line["msg"] == "hello" and line["level"] == "info" and line["logger"] == "aiplane.test"
    assert line["answer"] == 42
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", line["ts"])


def test_standard_library_records_come_out_the_same_way(stream: io.StringIO) -> None:
    with bind_controller("echo"):
        logging.getLogger("aiohttp.client").warning("connection reset")
    [line] = lines(stream)
    assert line["msg"] == "connection reset" and line["level"] == "warning"
    assert line["logger"] == "aiohttp.client" and line["controller"] == "echo"


async def test_reconcile_context_binds_key_and_a_fresh_id_inherited_by_nested_calls_and_tasks(
    stream: io.StringIO,
) -> None:
    log = get_logger("aiplane.controller")

    async def nested() -> None:
        log.info("nested")

    async def worker(key: str) -> str:
        with reconcile_context(controller="echo", key=key) as rid:
            assert current_reconcile_id() == rid
            await asyncio.sleep(0)
            await nested()
            await asyncio.create_task(nested())
            return rid

    ids = await asyncio.gather(worker("ns/a"), worker("ns/b"))
    assert ids[0] != ids[1]
    out = lines(stream)
    assert len(out) == 4
    for line in out:
        assert line["controller"] == "echo"
        assert line["reconcile_id"] == ids[0 if line["key"] == "ns/a" else 1]
    log.info("after")
    assert "key" not in lines(stream)[-1] and current_reconcile_id() is None


def test_secret_values_are_redacted_wherever_they_are(stream: io.StringIO) -> None:
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "annotations": {"note": "fine"}},
        "data": {"password": "c2VjcmV0", "user": "YWRtaW4="},
        "stringData": {"token": "plain"},
    }
    get_logger("aiplane.test").info(
        "objects",
        obj=secret,
        items=[{"spec": {"bearerToken": "abc", "replicas": 2}}],
        password="hunter2",
        headers={"Authorization": "Bearer xyz"},
    )
    [line] = lines(stream)
    text = json.dumps(line)
    for leaked in ("c2VjcmV0", "YWRtaW4=", "plain", "abc", "hunter2", "xyz"):
        assert leaked not in text
    assert line["obj"]["data"] == {"password": REDACTED, "user": REDACTED}  # keys kept, values gone
    assert line["obj"]["stringData"] == {"token": REDACTED}
    assert line["obj"]["metadata"] == secret["metadata"]
    assert line["items"][0]["spec"] == {"bearerToken": REDACTED, "replicas": 2}
    assert line["password"] == REDACTED
    assert line["headers"] == {"Authorization": REDACTED}
    # The logged object (possibly a shared informer-cache object) is untouched.
    assert secret["data"]["password"] == "c2VjcmV0"


def test_levels_filter_our_loggers(stream: io.StringIO) -> None:
    configure_logging("warning", stream=stream)
    get_logger("aiplane.test").info("hidden")
    get_logger("aiplane.test").warning("shown")
    assert [line["msg"] for line in lines(stream)] == ["shown"]
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("loud")
