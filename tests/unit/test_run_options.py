"""``aiplane run``'s flags come from the options dataclasses: one default per option, everywhere."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any

import pytest
from typer.core import TyperOption
from typer.main import get_command

from aiplane.cli import app
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.gang import GangOptions, GangScheduler
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.kube.flags import FLAG, GROUP, Flag
from aiplane.run import UsageError, options_from_flags
from aiplane.run_options import RunOptions
from tests.chart_helpers import render

#: Fields set only by code, never from the command line (with why).
NOT_FLAGS = {
    # The scheduler-plugins chart's profile name; a second scheduler is a test's concern, not an install's.
    "GangOptions.scheduler_name",
}


def _leaves(cls: type[Any]) -> list[tuple[type[Any], dataclasses.Field[Any]]]:
    """Every field of ``cls`` and of the options classes nested in it."""
    hints = typing.get_type_hints(cls)
    found: list[tuple[type[Any], dataclasses.Field[Any]]] = []
    for field in dataclasses.fields(cls):
        if field.metadata.get(GROUP):
            found += _leaves(hints[field.name])
        else:
            found.append((cls, field))
    return found


def _run_command() -> Any:
    return get_command(app).commands["run"]  # type: ignore[attr-defined]


def test_the_options_classes_are_the_groups_of_run() -> None:
    groups = {
        typing.get_type_hints(RunOptions)[f.name]
        for f in dataclasses.fields(RunOptions)
        if f.metadata.get(GROUP)
    }
    assert groups == {PartitioningOptions, DynamoOptions, GangOptions}


def test_every_option_has_exactly_one_flag_with_its_default() -> None:
    params = [p for p in _run_command().params if isinstance(p, TyperOption)]
    for cls, field in _leaves(RunOptions):
        spec = field.metadata.get(FLAG)
        if f"{cls.__name__}.{field.name}" in NOT_FLAGS:
            assert spec is None
            continue
        assert isinstance(spec, Flag), f"{cls.__name__}.{field.name} declares no flag"
        matching = [p for p in params if spec.long in p.opts]
        assert len(matching) == 1, (spec.name, matching)
        default = field.default.value if isinstance(field.default, enum.Enum) else field.default
        assert matching[0].default == default, spec.name
        assert matching[0].help == spec.help
    # ... and no flag without its field.
    declared = {f.metadata[FLAG].long for _, f in _leaves(RunOptions) if FLAG in f.metadata}
    assert {max(p.opts, key=len) for p in params} == declared


def test_no_flags_are_the_dataclass_defaults() -> None:
    ctx = _run_command().make_context("run", [])
    assert options_from_flags(ctx.params) == RunOptions()


def test_flags_reach_the_options_of_each_package() -> None:
    args = [
        "--drain-timeout",
        "60",
        "--ingress-controller-class-name",
        "nginx",
        "--gang-scheduler",
        "coscheduling",
    ]
    options = options_from_flags(_run_command().make_context("run", args).params)
    assert options.partitioning == PartitioningOptions(drain_timeout=60.0)
    assert options.dynamo == DynamoOptions(ingress_class="nginx")
    assert options.gang == GangOptions(GangScheduler.COSCHEDULING)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gang-scheduler", "kai"], "--gang-scheduler: 'kai' is not one of volcano, coscheduling"),
        (["--dcm-config", "no-slash"], "--dcm-config 'no-slash': expected NAMESPACE/NAME"),
    ],
)
def test_a_value_the_options_refuse_is_a_usage_error_naming_the_flag(args: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        options_from_flags(_run_command().make_context("run", args).params)


def test_the_charts_default_values_are_the_dataclass_defaults() -> None:
    """The chart passes every option as a flag; with its default values, each is the option's own
    default, except leader election, which the chart turns on (it runs two replicas)."""
    docs = render(None)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    options = options_from_flags(_run_command().make_context("run", list(args)).params)
    assert options == dataclasses.replace(RunOptions(), leader_elect=True)
