"""go-yaml's error words for PyYAML's errors: what kube-apiserver says when a YAML body does not parse.

kube converts YAML to JSON with sigs.k8s.io/yaml (go-yaml underneath); its parser names a line only
when the error is not on the first one (``parser.fail``), and words some problems differently.
"""

from __future__ import annotations

from typing import Final

import yaml

#: PyYAML's problem → go-yaml's, where they differ (by prefix: PyYAML appends what it found).
_PROBLEMS: Final = (
    ("mapping values are not allowed here", "mapping values are not allowed in this context"),
    ("expected ',' or '}'", "did not find expected ',' or '}'"),
    ("expected ',' or ']'", "did not find expected ',' or ']'"),
)


def go_yaml_error(exc: yaml.YAMLError) -> str:
    """``yaml: [line N: ]<problem>``: the line is the problem's (0-based, one more for a scanner error,
    whose mark has not moved on) or else the context's, and left out when it is 0."""
    problem = str(getattr(exc, "problem", None) or exc)
    problem = next((go for py, go in _PROBLEMS if problem.startswith(py)), problem)
    mark = getattr(exc, "problem_mark", None)
    context = getattr(exc, "context_mark", None)
    line = 0
    if mark is not None and mark.line:
        line = mark.line + (1 if isinstance(exc, yaml.scanner.ScannerError) else 0)
    elif context is not None and context.line:
        line = context.line
    where = f"line {line}: " if line else ""
    return f"yaml: {where}{problem}"
