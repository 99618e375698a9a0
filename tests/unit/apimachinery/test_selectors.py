"""Label selectors and node-selector terms match as kube's ``labels`` and ``nodeaffinity`` do."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.selectors import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    compile_selector,
    dns1123_subdomain_errors,
    format_label_selector,
    label_key_errors,
    label_value_errors,
    node_fields_of,
    node_selector_matches,
    node_selector_term_matches,
    parse_selector,
    required_node_affinity_matches,
    selector_from_set,
    selector_matches,
    validate_label_key,
    validate_label_value,
)

# -- LabelSelectorAsSelector ---------------------------------------------------------------------


def test_nil_matches_nothing_and_empty_matches_everything() -> None:
    assert not selector_matches(None, {})
    assert not selector_matches(None, {"app": "x"})
    assert selector_matches({}, {})
    assert selector_matches({}, {"app": "x"})
    assert selector_matches({"matchLabels": {}, "matchExpressions": []}, {"a": "b"})
    assert compile_selector({}).empty
    assert not compile_selector(None).empty
    assert compile_selector(None).to_string() == compile_selector({}).to_string() == ""


def test_match_labels_and_expressions_are_anded() -> None:
    sel = {
        "matchLabels": {"app": "x"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["z1"]},
            {"key": "gpu", "operator": "Exists"},
        ],
    }
    assert selector_matches(sel, {"app": "x", "tier": "a", "gpu": ""})
    assert selector_matches(sel, {"app": "x", "tier": "b", "gpu": "1", "zone": "z2"})
    assert not selector_matches(sel, {"app": "x", "tier": "a"})  # gpu missing
    assert not selector_matches(sel, {"app": "x", "tier": "c", "gpu": "1"})
    assert not selector_matches(sel, {"app": "y", "tier": "a", "gpu": "1"})
    assert not selector_matches(sel, {"app": "x", "tier": "a", "gpu": "1", "legacy": "true"})
    assert not selector_matches(sel, {"app": "x", "tier": "a", "gpu": "1", "zone": "z1"})
    assert not selector_matches(sel, None)


def test_notin_matches_an_absent_label_and_in_does_not() -> None:
    assert selector_matches({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["v"]}]}, {})
    assert not selector_matches({"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}, {})
    # the empty string is a value like any other
    assert selector_matches({"matchLabels": {"k": ""}}, {"k": ""})
    assert not selector_matches({"matchLabels": {"k": ""}}, {})


def test_string_form_is_sorted_by_key_with_sorted_values() -> None:
    sel = compile_selector(
        {
            "matchLabels": {"tier": "web", "app": "x"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b", "a"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "gpu", "operator": "Exists"},
            ],
        }
    )
    assert sel.to_string() == "app=x,env notin (dev),gpu,!legacy,tier=web,zone in (a,b)"
    assert str(sel) == sel.to_string()
    assert sel.requires_exact_match("app") == "x"
    assert sel.requires_exact_match("zone") is None
    assert sel.requires_exact_match("missing") is None


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Foo"}]},
            r'matchExpressions\[0\].operator: "Foo" is not a valid',
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, r"\"Gt\" is not a valid"),
        ({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]}, r"\"in\" is not a valid"),
        (
            {
                "matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "a", "operator": "In", "values": []},
                ]
            },
            r"matchExpressions\[1\].values: .*values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
            r"matchExpressions\[0\].values: .*can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            r"matchExpressions\[0\].values: .*must be empty for exists and does not exist",
        ),
        (
            {"matchExpressions": [{"key": "bad key", "operator": "Exists"}]},
            r"matchExpressions\[0\].key: Invalid value",
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, r"matchExpressions\[0\].key"),
        (
            {"matchLabels": {"app": "not valid"}},
            r'matchLabels\[app\].values\[0\]\[app\]: Invalid value: "not valid"',
        ),
        ({"matchLabels": {"-app": "x"}}, r"matchLabels\[-app\].key"),
        ({"matchLabels": ["app"]}, r"matchLabels"),
        ({"matchExpressions": {"key": "a"}}, r"matchExpressions"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]},
            r"matchExpressions\[0\].values",
        ),
    ],
)
def test_invalid_selectors_name_the_field(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compile_selector(selector)


def test_label_key_and_value_validation() -> None:
    for key in ("app", "app.kubernetes.io/name", "a_b.c-d", "x" * 63, "example.com/" + "x" * 63, "A1"):
        validate_label_key(key)
    for key in ("", "-a", "a-", "a/b/c", "/a", "Example.com/a", "x" * 64, "a b", "a\n"):
        with pytest.raises(ValueError, match="invalid label key"):
            validate_label_key(key)
    for value in ("", "v", "v1.2_3-x", "x" * 63):
        validate_label_value(value)
    for value in ("-v", "v-", "x" * 64, "a b", "a/b", "v\n"):
        with pytest.raises(ValueError, match="invalid label value"):
            validate_label_value(value)


def test_requirement_validation_messages() -> None:
    with pytest.raises(ValueError, match="exact-match compatibility requires one single value"):
        Requirement.new("a", "=", ["x", "y"])
    with pytest.raises(ValueError, match="for 'Gt', 'Lt' operators, exactly one value is required"):
        Requirement.new("a", Operator.GREATER_THAN, [])
    with pytest.raises(ValueError, match="the value must be an integer"):
        Requirement.new("a", Operator.LESS_THAN, ["1.5"])
    with pytest.raises(ValueError, match='operator: Unsupported value: "bogus"'):
        Requirement.new("a", "bogus", [])


def test_requirement_errors_are_kubes_field_errors_aggregated() -> None:
    """``NewRequirement`` collects every problem; ``utilerrors.Aggregate`` prints several in ``[]``."""
    with pytest.raises(ValueError) as err:
        Requirement.new("a", Operator.IN, [])
    assert (
        str(err.value) == "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    )
    with pytest.raises(ValueError) as err:
        Requirement.new("-k", Operator.GREATER_THAN, ["x", "-y"], path="spec.selector")
    message = str(err.value)
    assert message.startswith('[spec.selector.key: Invalid value: "-k": name part must consist')
    assert (
        "spec.selector.values: Invalid value: [\"x\",\"-y\"]: for 'Gt', 'Lt' operators, exactly one"
        in message
    )
    assert "spec.selector.values[1]: Invalid value: \"-y\": for 'Gt', 'Lt' operators, the value" in message
    assert 'spec.selector.values[1][-k]: Invalid value: "-y": a valid label must be' in message
    assert message.endswith("]")


def test_label_key_and_value_errors_are_kubes_texts() -> None:
    assert label_key_errors("example.com/app") == []
    assert label_key_errors("a/") == [
        "name part must be non-empty",
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]
    assert label_key_errors("Bad_/x")[0].startswith("prefix part a lowercase RFC 1123 subdomain")
    assert label_key_errors("a\n")  # Go's regexps anchor at the very end; Python's $ would not
    assert label_value_errors("") == []
    assert label_value_errors("x" * 64)[0] == "must be no more than 63 characters"


def test_gt_lt_need_an_integer_label() -> None:
    gt = Requirement.new("n", Operator.GREATER_THAN, ["5"])
    lt = Requirement.new("n", Operator.LESS_THAN, ["5"])
    assert gt.matches({"n": "6"}) and not gt.matches({"n": "5"}) and not gt.matches({"n": "4"})
    assert lt.matches({"n": "4"}) and not lt.matches({"n": "5"})
    assert not gt.matches({}) and not lt.matches({})  # absent never matches
    assert not gt.matches({"n": "abc"}) and not lt.matches({"n": "abc"})
    assert gt.matches({"n": "06"})  # strconv.ParseInt reads leading zeros
    for lax in (" 6", "6 ", "6_0", "٦"):  # Python's int() would accept these; ParseInt does not
        assert not gt.matches({"n": lax})
    assert not gt.matches({"n": str(1 << 63)})  # out of int64


def test_duplicate_values_print_once() -> None:
    """kube would print these as ``a in (,,)`` and ``a in (x,x)``; the first does not parse."""
    sel = compile_selector({"matchExpressions": [{"key": "a", "operator": "In", "values": ["", "", ""]}]})
    assert sel.to_string() == "a in ()"
    assert parse_selector("a in ()").matches({"a": ""})
    with pytest.raises(ValueError, match="found '\\)', expected: ',', or identifier"):
        parse_selector("a in (,,)")  # kube's parser rejects its own String() output here
    sel = compile_selector(
        {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["y", "x", "y"]}]}
    )
    assert sel.to_string() == "a notin (x,y)"


def test_selector_from_set() -> None:
    assert selector_from_set(None).matches({"a": "b"})
    assert selector_from_set({"b": "2", "a": "1"}).to_string() == "a=1,b=2"
    assert selector_from_set({"a": "1"}).matches({"a": "1", "z": "9"})
    assert not selector_from_set({"a": "1"}).matches({"a": "2"})


# -- labels.Parse --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("   ", ""),
        ("x=a", "x=a"),
        ("x = a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("a=b,c!=d,e in (x,y),!f", "a=b,c!=d,e in (x,y),!f"),
        ("!f,e in (y,x),c!=d,a=b", "a=b,c!=d,e in (x,y),!f"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x in (foo,foo)", "x in (foo)"),
        ("x=", "x="),
        ("x=,z=a", "x=,z=a"),
        ("x in (,)", "x in ()"),
        ("x in (a,)", "x in (,a)"),
        ("x in (,a)", "x in (,a)"),
        ("in in (in,notin)", "in in (in,notin)"),
        ("notin notin (in)", "notin notin (in)"),
        ("!in", "!in"),
        ("a>1,b<-1", None),  # "-1" is not a valid label value
        ("a>1,b<2", "a>1,b<2"),
        ("example.com/app in ( a , b )", "example.com/app in (a,b)"),
        ("\tx\n=\ra", "x=a"),
    ],
)
def test_parse_selector(text: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(ValueError):
            parse_selector(text)
        return
    sel = parse_selector(text)
    assert sel.to_string() == canonical
    assert parse_selector(canonical) == sel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("x=y,", "found '', expected: identifier after ','"),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        ("x in a", "found 'a' expected: '\\('"),
        ("x in (a b)", "found 'b', expected: ',' or '\\)'"),
        ("x a", "found 'a', expected: in, notin, =, ==, !=, gt, lt"),
        ("x=(a)", "found '\\(', expected: identifier"),
        ("x notin", "found '' expected: '\\('"),
        ("x>a", "the value must be an integer"),
        ("-x", 'unable to parse requirement: <nil>: Invalid value: "-x": name part must consist'),
        ("x=-a", 'unable to parse requirement: values\\[0\\]\\[x\\]: Invalid value: "-a"'),
        ("x in (a", "found '', expected: ',' or '\\)'"),
        ("!!x", "found '!', expected: identifier"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_selector(text)
    assert repr(text) in str(err.value)


def test_a_parse_error_carries_kubes_message() -> None:
    """``reason`` is what kube-apiserver answers a bad ``?labelSelector=`` with."""
    with pytest.raises(SelectorError) as err:
        parse_selector("a b")
    reason = "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    assert (err.value.text, err.value.reason) == ("a b", reason)
    assert str(err.value) == f"invalid selector 'a b': {reason}"


def test_parsed_selector_matches() -> None:
    sel = parse_selector("app=x,tier in (a,b),!legacy,gpu,zone notin (z1),n>3")
    assert sel.matches({"app": "x", "tier": "a", "gpu": "", "n": "4"})
    assert not sel.matches({"app": "x", "tier": "a", "gpu": "", "n": "3"})
    assert not sel.matches({"app": "x", "tier": "a", "gpu": "", "n": "4", "legacy": "1"})
    assert not sel.matches({"app": "x", "tier": "a", "gpu": "", "n": "4", "zone": "z1"})
    assert parse_selector("").matches({}) and parse_selector("").empty
    assert Selector.everything() == parse_selector("")


# -- string form round trip (property) -----------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "in", "example.com/c"])
_VALUES = st.sampled_from(["", "x", "y", "in", "notin", "v.1"])


@st.composite
def label_selectors(draw: st.DrawFn) -> dict[str, Any]:
    sel: dict[str, Any] = {}
    if draw(st.booleans()):
        sel["matchLabels"] = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
    exprs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        values = draw(st.lists(_VALUES, min_size=1, max_size=3)) if op in ("In", "NotIn") else []
        exprs.append({"key": draw(_KEYS), "operator": op, "values": values})
    keep_empty_list = draw(st.booleans())
    if exprs or keep_empty_list:
        sel["matchExpressions"] = exprs
    return sel


label_sets = st.dictionaries(_KEYS, _VALUES, max_size=4)


@given(label_selectors(), st.lists(label_sets, min_size=1, max_size=12))
def test_string_form_parses_back_to_an_equivalent_selector(
    sel: dict[str, Any], samples: list[dict[str, str]]
) -> None:
    compiled = compile_selector(sel)
    reparsed = parse_selector(compiled.to_string())
    assert reparsed.to_string() == compiled.to_string()
    assert parse_selector(reparsed.to_string()) == reparsed
    for labels in samples:
        assert reparsed.matches(labels) == compiled.matches(labels)


@given(label_selectors(), label_sets)
def test_selector_semantics_match_a_direct_reading_of_the_api_docs(
    sel: dict[str, Any], labels: dict[str, str]
) -> None:
    """An independent oracle: matchLabels pairs and every expression must hold."""
    expected = all(labels.get(k) == v for k, v in (sel.get("matchLabels") or {}).items())
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e["values"]
        expected = (
            expected
            and {
                "In": k in labels and labels[k] in vals,
                "NotIn": k not in labels or labels[k] not in vals,
                "Exists": k in labels,
                "DoesNotExist": k not in labels,
            }[op]
        )
    assert selector_matches(sel, labels) == expected


# -- node affinity -------------------------------------------------------------------------------

NODE_LABELS: dict[str, str] = {"zone": "a", "gpus": "8", "amd.com/gpu.product": "MI300X"}
NODE: dict[str, Any] = {"metadata": {"name": "node-1", "labels": NODE_LABELS}}
NODE_FIELDS = {"metadata.name": "node-1"}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


@pytest.mark.parametrize(
    ("term", "matches"),
    [
        ({"matchExpressions": [expr("zone", "In", "a", "b")]}, True),
        ({"matchExpressions": [expr("zone", "NotIn", "a")]}, False),
        ({"matchExpressions": [expr("missing", "NotIn", "a")]}, True),
        ({"matchExpressions": [expr("gpus", "Gt", "7")]}, True),
        ({"matchExpressions": [expr("gpus", "Gt", "8")]}, False),
        ({"matchExpressions": [expr("gpus", "Lt", "9")]}, True),
        ({"matchExpressions": [expr("zone", "Gt", "1")]}, False),  # non-integer label
        ({"matchExpressions": [expr("missing", "Lt", "9")]}, False),
        ({"matchExpressions": [expr("amd.com/gpu.product", "Exists")]}, True),
        ({"matchExpressions": [expr("zone", "DoesNotExist")]}, False),
        ({"matchExpressions": [expr("zone", "In", "a"), expr("gpus", "Gt", "100")]}, False),
        ({"matchFields": [expr("metadata.name", "In", "node-1")]}, True),
        ({"matchFields": [expr("metadata.name", "In", "node-2")]}, False),
        ({"matchFields": [expr("metadata.name", "NotIn", "node-2")]}, True),
        (
            {
                "matchExpressions": [expr("zone", "In", "a")],
                "matchFields": [expr("metadata.name", "In", "x")],
            },
            False,
        ),
        ({}, False),  # an empty term matches nothing
        ({"matchExpressions": [], "matchFields": []}, False),
    ],
)
def test_node_selector_term(term: dict[str, Any], matches: bool) -> None:
    assert node_selector_term_matches(term, NODE_LABELS, NODE_FIELDS) is matches


def test_node_selector_term_errors() -> None:
    with pytest.raises(ValueError, match=r'matchExpressions\[0\].operator: Unsupported value: "Foo"'):
        node_selector_term_matches({"matchExpressions": [expr("zone", "Foo")]}, NODE_LABELS, NODE_FIELDS)
    with pytest.raises(ValueError, match=r"matchExpressions\[0\].values\[0\]: .*must be an integer"):
        node_selector_term_matches({"matchExpressions": [expr("gpus", "Gt", "eight")]}, NODE_LABELS)
    with pytest.raises(ValueError, match=r"matchFields\[0\].values: .*must have one element"):
        node_selector_term_matches(
            {"matchFields": [expr("metadata.name", "In", "a", "b")]}, NODE_LABELS, NODE_FIELDS
        )
    with pytest.raises(ValueError, match=r'matchFields\[0\].operator: Unsupported value: "Exists"'):
        node_selector_term_matches(
            {"matchFields": [expr("metadata.name", "Exists")]}, NODE_LABELS, NODE_FIELDS
        )


def test_match_fields_are_ignored_without_node_fields() -> None:
    """kube's ``nodeSelectorTerm.match`` only checks fields when the node has some."""
    term = {"matchFields": [expr("metadata.name", "In", "other")]}
    assert node_selector_term_matches(term, NODE_LABELS, {})
    assert not node_selector_term_matches(term, NODE_LABELS, NODE_FIELDS)


def test_node_selector_terms_are_ored() -> None:
    ns = {
        "nodeSelectorTerms": [
            {"matchExpressions": [expr("zone", "In", "b")]},
            {},  # skipped
            {"matchExpressions": [expr("zone", "Bogus")]},  # invalid: does not match
            {"matchExpressions": [expr("gpus", "Gt", "4")]},
        ]
    }
    assert node_selector_matches(ns, NODE_LABELS, NODE_FIELDS)
    assert not node_selector_matches(
        {"nodeSelectorTerms": ns["nodeSelectorTerms"][:3]}, NODE_LABELS, NODE_FIELDS
    )
    assert not node_selector_matches({"nodeSelectorTerms": []}, NODE_LABELS, NODE_FIELDS)
    assert node_selector_matches(None, NODE_LABELS, NODE_FIELDS)


def test_required_node_affinity() -> None:
    assert node_fields_of(NODE) == NODE_FIELDS
    assert node_fields_of({"metadata": {}}) == {}
    assert required_node_affinity_matches({}, NODE)
    assert required_node_affinity_matches({"nodeSelector": {"zone": "a"}}, NODE)
    assert not required_node_affinity_matches({"nodeSelector": {"zone": "b"}}, NODE)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [expr("metadata.name", "In", "node-1")]}]
            }
        }
    }
    assert required_node_affinity_matches({"affinity": affinity}, NODE)
    assert not required_node_affinity_matches({"affinity": affinity}, {"metadata": {"name": "node-2"}})
    assert not required_node_affinity_matches({"affinity": affinity, "nodeSelector": {"zone": "b"}}, NODE)
    # preferred terms and other affinity kinds do not constrain
    assert required_node_affinity_matches({"affinity": {"podAntiAffinity": {}}}, NODE)


def test_format_label_selector_is_kubes() -> None:
    """``metav1.FormatLabelSelector``: kube's ``String()`` verbatim, ``<none>`` and ``<error>``."""
    assert format_label_selector(None) == "<none>"
    assert format_label_selector({}) == "<none>"
    assert format_label_selector({"matchLabels": {}, "matchExpressions": []}) == "<none>"
    selector = {
        "matchLabels": {"tier": "web", "app": "x"},
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["b", "a", "b"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "gpu", "operator": "Exists"},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
        ],
    }
    assert format_label_selector(selector) == "app=x,env notin (prod),gpu,!legacy,tier=web,zone in (a,b,b)"
    assert (
        compile_selector(selector).to_string() == "app=x,env notin (prod),gpu,!legacy,tier=web,zone in (a,b)"
    )
    for bad in (
        {"matchExpressions": [{"key": "a", "operator": "Near"}]},
        {"matchExpressions": [{"key": "a", "operator": "In"}]},
        {"matchLabels": {"a": "-x"}},
    ):
        assert format_label_selector(bad) == "<error>"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Foo"}]},
            '"Foo" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "NotIn"}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
        ),
        ({"matchLabels": {"-app": "x"}}, 'key: Invalid value: "-app": name part must consist'),
        ({"matchLabels": {"app": "-x"}}, 'values[0][app]: Invalid value: "-x": a valid label must be'),
    ],
)
def test_label_selector_as_selector_messages_without_field_paths(
    selector: dict[str, Any], message: str
) -> None:
    """``field_paths=False``: ``LabelSelectorAsSelector``'s own texts, which name no selector entry."""
    with pytest.raises(ValueError) as err:
        compile_selector(selector, field_paths=False)
    assert str(err.value).startswith(message)


def test_dns1123_subdomain_errors() -> None:
    assert dns1123_subdomain_errors("example.com") == []
    assert dns1123_subdomain_errors("a" * 254) == ["must be no more than 253 characters"]
    assert dns1123_subdomain_errors("Example.com") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
        "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert dns1123_subdomain_errors("a\n")  # Go's $ is the very end of the text
    assert label_key_errors("x" * 254 + "/a") == ["prefix part must be no more than 253 characters"]
