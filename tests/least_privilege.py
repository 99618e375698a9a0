"""Compare what the operator used under RBAC (the audit of the e2e suites) with the chart's rules.

Every (verb, group, resource) the chart's ClusterRole and Role grant must be used by some e2e test, or be
listed in docs/install.md ("Rules no test exercises") with why it is needed anyway. A rule that is
neither is more than the operator needs: remove it from the controller's ``PERMISSIONS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSTALL_DOC = ROOT / "docs" / "install.md"
HEADING = "### Rules no test exercises"

#: (verb, apiGroup, resource or resource/subresource): one grant of a rule, or one kind of request.
Grant = tuple[str, str, str]


def grants(manifests: Iterable[Mapping[str, Any]]) -> set[Grant]:
    """Every (verb, group, resource) the ClusterRoles and Roles in ``manifests`` grant."""
    out: set[Grant] = set()
    for doc in manifests:
        if doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    out.update((verb, group, resource) for verb in rule.get("verbs") or [])
    return out


def used(permissions: Iterable[tuple[Any, ...]]) -> set[Grant]:
    """The grants behind audit permission keys (user, verb, group, resource, subresource, namespace,
    allowed) that were allowed."""
    return {
        (verb, group, f"{resource}/{sub}" if sub else resource)
        for _user, verb, group, resource, sub, _ns, allowed in permissions
        if allowed and resource
    }


def label(grant: Grant) -> str:
    verb, group, resource = grant
    return f"{verb} {group or 'core'}/{resource}"


def justified(text: str | None = None) -> dict[str, str]:
    """The rules docs/install.md justifies although no test uses them: ``label`` -> why."""
    text = INSTALL_DOC.read_text(encoding="utf-8") if text is None else text
    _, _, section = text.partition(HEADING)
    section = section.split("\n#", 1)[0]
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$", section, re.MULTILINE)
    return {rule: why for rule, why in rows}


def report(
    granted: set[Grant], exercised: set[Grant], reasons: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(unjustified, stale): granted rules nothing used and the docs do not justify; justifications of
    rules that a test did use (or that the chart no longer grants)."""
    unjustified = sorted(label(g) for g in granted - exercised if label(g) not in reasons)
    granted_labels = {label(g) for g in granted}
    exercised_labels = {label(g) for g in exercised}
    stale = sorted(r for r in reasons if r in exercised_labels or r not in granted_labels)
    return unjustified, stale
