"""Fixtures of the schema tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.schema.helpers import plan_schema


@pytest.fixture()
def schema() -> dict[str, Any]:
    """The PartitioningPlan CRD schema as generated from the models."""
    return plan_schema()
