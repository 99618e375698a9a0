"""Server-side printing: Accept negotiation, the JSONPath subset, ages and the column sets kube prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from multidict import MultiDict, MultiDictProxy

from aiplane.api.crdgen import all_crds
from aiplane.sim import fleet
from aiplane.sim.apiserver import errors, jsonpath, printing, table
from aiplane.sim.apiserver.jsonpath import JSONPath, JSONPathError
from aiplane.sim.apiserver.messages import ApiRequest
from aiplane.sim.apiserver.resources import BUILTINS, ResourceType, types_from_crd
from aiplane.sim.apiserver.server import ApiServer

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL_ACCEPT = f"{TABLE_V1},application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def builtin(group: str, kind: str) -> ResourceType:
    return next(rt for rt in BUILTINS if (rt.group, rt.kind) == (group, kind))


def crd_type(plural: str) -> ResourceType:
    crd = next(c for c in all_crds() if c["spec"]["names"]["plural"] == plural)
    return types_from_crd(crd)[0]


def header(rt: ResourceType) -> list[str]:
    return [c["name"] for c in table.columns_for(rt) if c["priority"] == 0]


def wide_header(rt: ResourceType) -> list[str]:
    return [c["name"] for c in table.columns_for(rt)]


def cells(rt: ResourceType, obj: dict[str, Any]) -> list[Any]:
    _, rows = table.rows_for(rt, [obj], NOW)
    return list(rows[0]["cells"])


def request(path: str = "/api/v1/nodes", accept: str = KUBECTL_ACCEPT) -> ApiRequest:
    url = urlsplit(path)
    return ApiRequest("GET", url.path, MultiDictProxy(MultiDict(parse_qsl(url.query))), {"Accept": accept})


def options(path: str = "/api/v1/nodes", accept: str = KUBECTL_ACCEPT) -> table.TableOptions:
    req = request(path, accept)
    negotiated = table.negotiate(req.accept, req.query)
    assert negotiated is not None
    return negotiated


# --- negotiation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_ACCEPT, "v1"),
        ("application/json;as=Table;g=meta.k8s.io;v=v1beta1", "v1beta1"),
        ("application/json; as=Table; v=v1; g=meta.k8s.io", "v1"),
        ("application/json", None),
        ("*/*", None),
        ("", None),
        # A plain JSON clause preferred by q wins over the Table one.
        (f"{TABLE_V1};q=0.5,application/json", None),
        # Table of another group, or of a version that does not exist, is not a Table.
        ("application/json;as=Table;v=v1;g=example.com,application/json", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
        # PartialObjectMetadata is not this module's business.
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
        # A non-JSON clause first is skipped (protobuf is not served as a Table here).
        (f"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,{TABLE_V1}", "v1"),
    ],
)
def test_accept_negotiation(accept: str, version: str | None) -> None:
    req = request(accept=accept)
    assert table.table_version(req.accept) == version
    assert table.wants_table(req.accept) is (version is not None)


def test_include_object_is_validated() -> None:
    assert table.include_object(request("/api/v1/nodes").query) == "Metadata"
    assert table.include_object(request("/api/v1/nodes?includeObject=None").query) == "None"
    with pytest.raises(errors.ApiError) as caught:
        table.include_object(request("/api/v1/nodes?includeObject=Everything").query)
    assert caught.value.code == 400
    assert caught.value.message == (
        'Unable to convert to Table as requested: includeObject: Unsupported value: "Everything": '
        'supported values: "", "Metadata", "None", "Object"'
    )


# --- ages -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59.9, "59s"),
        (119, "119s"),
        (120, "2m"),
        (312, "5m12s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60 + 9, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"),
        (3 * 86400 + 5 * 3600, "3d5h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (740 * 86400, "2y10d"),
        (8 * 365 * 86400, "8y"),
        (20 * 365 * 86400 + 86400 * 40, "20y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert printing.human_duration(seconds) == text


def test_since_parses_rfc3339_variants() -> None:
    assert printing.since(ago(minutes=5, seconds=12), NOW) == "5m12s"
    assert printing.since("2026-11-21T11:59:30.123456Z", NOW) == "29s"
    assert printing.since("2026-11-21T13:00:00+02:00", NOW) == "60m"
    assert printing.since(None, NOW) == "<unknown>"
    assert printing.since("", NOW) == "<unknown>"
    assert printing.since("yesterday", NOW) == "<invalid>"


# --- JSONPath -------------------------------------------------------------------------------------

DOC: dict[str, Any] = {
    "metadata": {"name": "x", "labels": {"app.kubernetes.io/name": "web", "tier": "front"}},
    "spec": {"replicas": 3, "paused": False, "ratio": 0.25, "ports": [80, 443, 8080]},
    "status": {
        "conditions": [
            {"type": "Progressing", "status": "True", "reason": "NewRS", "observedGeneration": 1},
            {"type": "Ready", "status": "False", "reason": "Waiting", "observedGeneration": 2},
        ],
        "nested": [{"items": [{"v": 1}, {"v": 2}]}, {"items": [{"v": 3}]}],
    },
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".metadata.name", ["x"]),
        ("{.metadata.name}", ["x"]),
        ("$.spec.replicas", [3]),
        (".spec.paused", [False]),
        (".spec.missing", []),
        (".missing.deeper", []),
        ('.status.conditions[?(@.type=="Ready")].status', ["False"]),
        (".status.conditions[?(@.type=='Ready')].reason", ["Waiting"]),
        ('.status.conditions[?(@.type == "Ready")].reason', ["Waiting"]),
        ('.status.conditions[?(@.type!="Ready")].type', ["Progressing"]),
        (".status.conditions[?(@.observedGeneration>1)].type", ["Ready"]),
        (".status.conditions[?(@.observedGeneration<=1)].type", ["Progressing"]),
        (".status.conditions[?(@.reason)].type", ["Progressing", "Ready"]),
        (".status.conditions[?(@.message)].type", []),
        (".status.conditions[0].type", ["Progressing"]),
        (".status.conditions[-1].type", ["Ready"]),
        (".status.conditions[*].type", ["Progressing", "Ready"]),
        (".status.conditions[0:1].type", ["Progressing"]),
        (".spec.ports[0:3:2]", [80, 8080]),
        (".spec.ports[0,2]", [80, 8080]),
        (".metadata.labels['app.kubernetes.io/name']", ["web"]),
        (".metadata.labels.app\\.kubernetes\\.io/name", ["web"]),
        (".metadata.labels['tier','missing']", ["front"]),
        (".metadata.labels.*", ["web", "front"]),
        (".status.nested[*].items[*].v", [1, 2, 3]),
        ("..v", [1, 2, 3]),
    ],
)
def test_jsonpath(path: str, expected: list[Any]) -> None:
    assert JSONPath(path).find(DOC) == expected


@pytest.mark.parametrize(
    "path",
    [
        ".status.conditions[5].type",  # out of bounds
        ".metadata.name[0]",  # not a list
        '.metadata[?(@.name=="x")]',  # filtering a map
        '.status.conditions[?(@.observedGeneration=="2")].type',  # int vs string
        ".status.conditions[?(@.observedGeneration==2.0)].type",  # int vs float
    ],
)
def test_jsonpath_errors(path: str) -> None:
    with pytest.raises(JSONPathError):
        JSONPath(path).find(DOC)


@pytest.mark.parametrize("path", [".a[", ".a[?(@.x==1]", ".a[1:2:3:4]", ".a[x]"])
def test_jsonpath_parse_errors(path: str) -> None:
    with pytest.raises(JSONPathError):
        JSONPath(path)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("s", "s"),
        (3, "3"),
        (True, "true"),
        (None, "<nil>"),
        (1.5, "1.5"),
        (2.0, "2"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e21, "1e+21"),
        (-2.5e-7, "-2.5e-07"),
        (["a", 1, {"k": "v"}], "[a 1 map[k:v]]"),
        ({"b": 2, "a": [1, 2]}, "map[a:[1 2] b:2]"),
    ],
)
def test_values_print_like_go(value: Any, text: str) -> None:
    assert jsonpath.go_print(value) == text


@pytest.mark.parametrize(
    ("kind", "value", "cell"),
    [
        ("integer", 5, 5),
        ("integer", 5.7, 5),
        ("integer", "5", None),
        ("integer", True, None),
        ("number", 2, 2.0),
        ("number", 0.5, 0.5),
        ("boolean", False, False),
        ("boolean", "false", None),
        ("string", "x", "x"),
        ("date", ago(days=3, hours=5), "3d5h"),
        ("date", "not a date", "<invalid>"),
        ("date", 12, None),
        ("integer", None, None),
    ],
)
def test_cell_for_json_value(kind: str, value: Any, cell: Any) -> None:
    assert table.cell_for_json_value(kind, value, NOW) == cell


# --- custom resources -----------------------------------------------------------------------------


def test_crd_printer_columns_with_filters_types_and_priorities() -> None:
    rt = crd_type("partitioningprofiles")
    columns = table.columns_for(rt)
    assert [(c["name"], c["type"], c["priority"]) for c in columns] == [
        ("Name", "string", 0),
        ("DCM-Profile", "string", 0),
        ("Ready", "string", 0),
        ("Reason", "string", 1),
        ("Age", "date", 0),
    ]
    assert columns[0]["format"] == "name"
    assert columns[1]["description"] == "DCM profile name"
    assert columns[2]["description"] == (
        'Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status'
    )
    obj = {
        "metadata": {"name": "mi300x-cpx", "creationTimestamp": ago(minutes=5, seconds=12)},
        "spec": {"dcmProfileName": "cpx_nps4"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Validated"}]},
    }
    assert cells(rt, obj) == ["mi300x-cpx", "cpx_nps4", "True", "Validated", "5m12s"]
    bare = {"metadata": {"name": "p", "creationTimestamp": ago(hours=50)}, "spec": {}}
    assert cells(rt, bare) == ["p", None, None, None, "2d2h"]


def test_crd_integer_and_boolean_columns() -> None:
    rt = crd_type("partitioningplans")
    assert wide_header(rt) == [
        "Name",
        "Phase",
        "Succeeded",
        "Failed",
        "Total",
        "In-Progress",
        "Max-Parallel",
        "Paused",
        "Dry-Run",
        "Age",
    ]
    assert header(rt) == ["Name", "Phase", "Succeeded", "Failed", "Total", "Age"]
    obj = {
        "metadata": {"name": "plan", "creationTimestamp": ago(seconds=30)},
        "spec": {"rollout": {"maxParallel": 2}, "paused": True},
        "status": {
            "phase": "Rolling",
            "summary": {"succeeded": 3, "failed": 0, "matchingNodes": 4, "inProgress": 1},
        },
    }
    assert cells(rt, obj) == ["plan", "Rolling", 3, 0, 4, 1, 2, True, None, "30s"]


def test_crd_without_printer_columns_prints_name_and_age() -> None:
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }
    rt = types_from_crd(crd)[0]
    columns = table.columns_for(rt)
    assert [(c["name"], c["type"]) for c in columns] == [("Name", "string"), ("Age", "date")]
    assert columns[1]["description"].startswith("CreationTimestamp is a timestamp")
    assert cells(rt, {"metadata": {"name": "w", "creationTimestamp": ago(days=400)}}) == ["w", "400d"]


def test_string_columns_print_non_strings_like_go() -> None:
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [
                        {"name": "Count", "type": "string", "jsonPath": ".spec.count"},
                        {"name": "Tags", "type": "string", "jsonPath": ".spec.tags"},
                        {"name": "Bad", "type": "string", "jsonPath": ".spec.tags[9]"},
                        {"name": "Ratio", "type": "number", "jsonPath": ".spec.count"},
                    ],
                }
            ],
        },
    }
    rt = types_from_crd(crd)[0]
    obj = {"metadata": {"name": "w"}, "spec": {"count": 3, "tags": ["a", "b"]}}
    assert cells(rt, obj) == ["w", "3", "[a b]", None, 3.0]


# --- built-in column sets -------------------------------------------------------------------------


def test_node_columns_roles_and_cordon() -> None:
    rt = builtin("", "Node")
    assert header(rt) == ["Name", "Status", "Roles", "Age", "Version"]
    assert wide_header(rt)[5:] == [
        "Internal-IP",
        "External-IP",
        "OS-Image",
        "Kernel-Version",
        "Container-Runtime",
    ]
    nodes = {n["metadata"]["name"]: n for n in fleet.node_objects(fleet.DEFAULT_FLEET)}
    control = next(
        n for n in nodes.values() if "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]
    )
    control["metadata"]["creationTimestamp"] = ago(days=3)
    row = cells(rt, control)
    assert row[1:5] == ["Ready", "control-plane", "3d", fleet.KUBELET_VERSION]
    assert row[6] == "<none>" and row[7].startswith("Ubuntu")
    cordoned = {
        "metadata": {
            "name": "n",
            "labels": {"kubernetes.io/role": "gpu", "node-role.kubernetes.io/worker": ""},
        },
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert cells(rt, cordoned)[1:3] == ["NotReady,SchedulingDisabled", "gpu,worker"]
    assert cells(rt, {"metadata": {"name": "bare"}})[1:] == [
        "Unknown",
        "<none>",
        "<unknown>",
        "",
        "<none>",
        "<none>",
        "<unknown>",
        "<unknown>",
        "<unknown>",
    ]


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "creationTimestamp": ago(minutes=7)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "h100-0"},
        "status": status,
    }


def running(restarts: int = 0, ready: bool = True, finished: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"ready": ready, "restartCount": restarts, "state": {"running": {}}}
    if finished:
        status["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": finished}}
    return status


def test_pod_columns() -> None:
    rt = builtin("", "Pod")
    assert header(rt) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert wide_header(rt)[5:] == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    pending = pod(phase="Pending")
    assert cells(rt, pending) == ["p", "0/2", "Pending", "0", "7m", "<none>", "h100-0", "<none>", "<none>"]
    up = pod(
        phase="Running",
        podIPs=[{"ip": "10.0.0.7"}],
        conditions=[{"type": "Ready", "status": "True"}],
        containerStatuses=[running(), running(restarts=2, finished=ago(minutes=3))],
    )
    assert cells(rt, up)[:6] == ["p", "2/2", "Running", "2 (3m ago)", "7m", "10.0.0.7"]
    crashing = pod(
        phase="Running",
        containerStatuses=[
            running(),
            {"ready": False, "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ],
    )
    assert cells(rt, crashing)[1:4] == ["1/2", "CrashLoopBackOff", "5"]


def test_pod_init_containers_completion_and_deletion() -> None:
    rt = builtin("", "Pod")
    init = pod(
        phase="Pending",
        initContainerStatuses=[{"restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}],
    )
    init["spec"]["initContainers"] = [{"name": "setup"}]
    assert cells(rt, init)[2] == "Init:0/1"
    failed_init = pod(
        phase="Pending",
        initContainerStatuses=[{"restartCount": 1, "state": {"terminated": {"exitCode": 3}}}],
    )
    failed_init["spec"]["initContainers"] = [{"name": "setup"}]
    assert cells(rt, failed_init)[2] == "Init:ExitCode:3"
    sidecar = pod(
        phase="Running",
        conditions=[{"type": "Initialized", "status": "True"}],
        initContainerStatuses=[
            {"name": "proxy", "started": True, "ready": True, "restartCount": 0, "state": {"running": {}}}
        ],
        containerStatuses=[running(), running()],
    )
    sidecar["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
    assert cells(rt, sidecar)[1:3] == ["3/3", "Running"]
    done = pod(
        phase="Succeeded",
        containerStatuses=[{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}] * 2,
    )
    _, rows = table.rows_for(rt, [done], NOW)
    assert rows[0]["cells"][2] == "Completed"
    assert rows[0]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    deleting = pod(phase="Running", containerStatuses=[running(), running()])
    deleting["metadata"]["deletionTimestamp"] = ago(seconds=1)
    assert cells(rt, deleting)[2] == "Terminating"
    gated = pod(
        phase="Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    )
    assert cells(rt, gated)[2] == "SchedulingGated"
    gates = pod(phase="Running", conditions=[{"type": "example.com/ready", "status": "True"}])
    gates["spec"]["readinessGates"] = [{"conditionType": "example.com/ready"}, {"conditionType": "other"}]
    assert cells(rt, gates)[8] == "1/2"


def test_simple_core_columns() -> None:
    created = {"creationTimestamp": ago(seconds=45)}
    ns = {"metadata": {"name": "default", **created}, "status": {"phase": "Active"}}
    assert header(builtin("", "Namespace")) == ["Name", "Status", "Age"]
    assert cells(builtin("", "Namespace"), ns) == ["default", "Active", "45s"]
    cm = {"metadata": {"name": "cm", **created}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}}
    assert header(builtin("", "ConfigMap")) == ["Name", "Data", "Age"]
    assert cells(builtin("", "ConfigMap"), cm) == ["cm", 2, "45s"]
    secret = {
        "metadata": {"name": "s", **created},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "", "tls.key": ""},
    }
    assert header(builtin("", "Secret")) == ["Name", "Type", "Data", "Age"]
    assert cells(builtin("", "Secret"), secret) == ["s", "kubernetes.io/tls", 2, "45s"]
    sa = {"metadata": {"name": "default", **created}}
    assert header(builtin("", "ServiceAccount")) == ["Name", "Secrets", "Age"]
    assert cells(builtin("", "ServiceAccount"), sa) == ["default", 0, "45s"]
    ep = {
        "metadata": {"name": "svc", **created},
        "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(5)], "ports": [{"port": 80}]}],
    }
    assert cells(builtin("", "Endpoints"), ep) == [
        "svc",
        "10.0.0.0:80,10.0.0.1:80,10.0.0.2:80 + 2 more...",
        "45s",
    ]
    lease = {"metadata": {"name": "l", **created}, "spec": {"holderIdentity": "ctrl-1"}}
    assert header(builtin("coordination.k8s.io", "Lease")) == ["Name", "Holder", "Age"]
    assert cells(builtin("coordination.k8s.io", "Lease"), lease) == ["l", "ctrl-1", "45s"]


def test_service_columns() -> None:
    rt = builtin("", "Service")
    assert header(rt) == ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"]
    assert wide_header(rt)[-1] == "Selector"
    svc = {
        "metadata": {"name": "web", "creationTimestamp": ago(hours=2)},
        "spec": {
            "type": "NodePort",
            "clusterIPs": ["10.96.0.10"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "selector": {"b": "2", "a": "1"},
        },
    }
    assert cells(rt, svc) == [
        "web",
        "NodePort",
        "10.96.0.10",
        "<none>",
        "80:30080/TCP,53/UDP",
        "120m",
        "a=1,b=2",
    ]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}}
    assert cells(rt, lb)[3] == "<pending>"
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}
    assert cells(rt, lb)[3] == "203.0.113.9"


def test_workload_columns() -> None:
    template = {"spec": {"containers": [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:2"}]}}
    selector = {
        "matchLabels": {"app": "x"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
    }
    created = {"creationTimestamp": ago(days=1)}
    deploy = {
        "metadata": {"name": "d", **created},
        "spec": {"replicas": 3, "selector": selector, "template": template},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    rt = builtin("apps", "Deployment")
    assert header(rt) == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert wide_header(rt)[5:] == ["Containers", "Images", "Selector"]
    assert cells(rt, deploy) == ["d", "2/3", 3, 2, "24h", "a,b", "img:1,img:2", "app=x,tier in (a,b)"]
    sts = {
        "metadata": {"name": "s", **created},
        "spec": {"replicas": 2, "template": template},
        "status": {"readyReplicas": 1},
    }
    assert header(builtin("apps", "StatefulSet")) == ["Name", "Ready", "Age"]
    assert cells(builtin("apps", "StatefulSet"), sts) == ["s", "1/2", "24h", "a,b", "img:1,img:2"]
    ds = {
        "metadata": {"name": "ds", **created},
        "spec": {"template": {"spec": {**template["spec"], "nodeSelector": {"gpu": "true"}}}},
        "status": {"desiredNumberScheduled": 4, "currentNumberScheduled": 4, "numberReady": 3},
    }
    rt = builtin("apps", "DaemonSet")
    assert header(rt) == [
        "Name",
        "Desired",
        "Current",
        "Ready",
        "Up-to-date",
        "Available",
        "Node Selector",
        "Age",
    ]
    assert cells(rt, ds) == ["ds", 4, 4, 3, 0, 0, "gpu=true", "24h", "a,b", "img:1,img:2", "<none>"]
    rs = {
        "metadata": {"name": "rs", **created},
        "spec": {"replicas": 2, "template": template},
        "status": {"replicas": 2},
    }
    assert header(builtin("apps", "ReplicaSet")) == ["Name", "Desired", "Current", "Ready", "Age"]
    assert cells(builtin("apps", "ReplicaSet"), rs)[:5] == ["rs", 2, 2, 0, "24h"]
    rev = {
        "metadata": {
            "name": "sts-7f9",
            **created,
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "controller": True}
            ],
        },
        "revision": 3,
    }
    assert header(builtin("apps", "ControllerRevision")) == ["Name", "Controller", "Revision", "Age"]
    assert cells(builtin("apps", "ControllerRevision"), rev) == ["sts-7f9", "statefulset.apps/s", 3, "24h"]


def test_job_columns() -> None:
    rt = builtin("batch", "Job")
    assert header(rt) == ["Name", "Status", "Completions", "Duration", "Age"]
    job = {
        "metadata": {"name": "j", "creationTimestamp": ago(minutes=30)},
        "spec": {"completions": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {
            "succeeded": 3,
            "startTime": ago(minutes=30),
            "completionTime": ago(minutes=25),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert cells(rt, job)[:5] == ["j", "Complete", "3/3", "5m", "30m"]
    running_job = {
        "metadata": {"name": "r"},
        "spec": {"parallelism": 4},
        "status": {"startTime": ago(seconds=90)},
    }
    assert cells(rt, running_job)[1:4] == ["Running", "0/1 of 4", "90s"]
    assert cells(rt, {"metadata": {"name": "n"}, "spec": {}})[1:4] == ["Running", "0/1", ""]


def test_policy_autoscaling_networking_rbac_events() -> None:
    created = {"creationTimestamp": ago(minutes=1)}
    pdb = {
        "metadata": {"name": "pdb", **created},
        "spec": {"maxUnavailable": "25%"},
        "status": {"disruptionsAllowed": 1},
    }
    rt = builtin("policy", "PodDisruptionBudget")
    assert header(rt) == ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
    assert cells(rt, pdb) == ["pdb", "N/A", "25%", 1, "60s"]
    hpa = {
        "metadata": {"name": "h", **created},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"averageUtilization": 80}}}
            ],
        },
        "status": {
            "currentReplicas": 2,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 35}}}
            ],
        },
    }
    rt = builtin("autoscaling", "HorizontalPodAutoscaler")
    assert header(rt) == ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]
    assert cells(rt, hpa) == ["h", "Deployment/web", "cpu: 35%/80%", "<unset>", 10, 2, "60s"]
    ing = {
        "metadata": {"name": "i", **created},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example.com"}, {}], "tls": [{}]},
    }
    rt = builtin("networking.k8s.io", "Ingress")
    assert header(rt) == ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
    assert cells(rt, ing) == ["i", "nginx", "a.example.com", "", "80, 443", "60s"]
    binding = {
        "metadata": {"name": "b", **created},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
        ],
    }
    rt = builtin("rbac.authorization.k8s.io", "RoleBinding")
    assert header(rt) == ["Name", "Role", "Age"]
    assert cells(rt, binding) == ["b", "ClusterRole/view", "60s", "alice", "devs", "ci/bot"]
    assert header(builtin("rbac.authorization.k8s.io", "ClusterRoleBinding")) == ["Name", "Role", "Age"]
    event = {
        "metadata": {"name": "p.1", **created},
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "message": " pulled \n",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "h100-0"},
        "firstTimestamp": ago(minutes=10),
        "lastTimestamp": ago(minutes=2),
        "count": 3,
    }
    rt = builtin("", "Event")
    assert header(rt) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert cells(rt, event) == [
        "2m",
        "Normal",
        "Pulled",
        "pod/p",
        "spec.containers{c}",
        "kubelet, h100-0",
        "pulled",
        "10m",
        3,
        "p.1",
    ]
    new_style = {
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e", **created},
        "regarding": {"kind": "Node", "name": "n"},
        "reason": "Partitioned",
        "note": "ok",
        "type": "Normal",
        "eventTime": "2026-11-21T11:58:00.000000Z",
        "reportingController": "aiplane",
        "reportingInstance": "aiplane-0",
    }
    assert cells(builtin("events.k8s.io", "Event"), new_style) == [
        "2m",
        "Normal",
        "Partitioned",
        "node/n",
        "",
        "aiplane, aiplane-0",
        "ok",
        "2m",
        1,
        "e",
    ]


def test_pvc_columns() -> None:
    rt = builtin("", "PersistentVolumeClaim")
    assert header(rt) == [
        "Name",
        "Status",
        "Volume",
        "Capacity",
        "Access Modes",
        "StorageClass",
        "VolumeAttributesClass",
        "Age",
    ]
    pvc = {
        "metadata": {"name": "data", "creationTimestamp": ago(hours=1)},
        "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
        "status": {
            "phase": "Bound",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
        },
    }
    assert cells(rt, pvc) == ["data", "Bound", "pv-1", "10Gi", "RWO,RWX", "fast", "<unset>", "60m", "<unset>"]


def test_kinds_without_a_print_handler_use_the_default_convertor() -> None:
    for group, kind in [
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
    ]:
        rt = builtin(group, kind)
        assert [(c["name"], c["type"]) for c in table.columns_for(rt)] == [
            ("Name", "string"),
            ("Created At", "date"),
        ]
        obj = {"metadata": {"name": "x", "creationTimestamp": "2026-11-21T13:00:00+02:00"}}
        assert cells(rt, obj) == ["x", "2026-11-21T11:00:00Z"]


def test_crds_print_scope_served_versions_and_whether_established() -> None:
    rt = builtin("apiextensions.k8s.io", "CustomResourceDefinition")
    assert [(c["name"], c["type"], c.get("priority", 0)) for c in table.columns_for(rt)] == [
        ("Name", "string", 0),
        ("Scope", "string", 0),
        ("Versions", "string", 0),
        ("Created At", "date", 0),
        ("Group", "string", 1),
        ("Kind", "string", 1),
        ("ShortNames", "string", 1),
        ("Established", "boolean", 1),
    ]
    crd = {
        "metadata": {"name": "gs.x.io", "creationTimestamp": "2026-11-21T13:00:00+02:00"},
        "spec": {
            "group": "x.io",
            "scope": "Namespaced",
            "names": {"kind": "G", "plural": "gs", "shortNames": ["g", "gg"]},
            "versions": [
                {"name": "v2", "served": True, "storage": False},
                {"name": "v1", "served": True, "storage": True},
                {"name": "v0", "served": False, "storage": False},
            ],
        },
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }
    assert cells(rt, crd) == [
        "gs.x.io",
        "Namespaced",
        "v1(storage),v2",
        "2026-11-21T11:00:00Z",
        "x.io",
        "G",
        "g,gg",
        True,
    ]


def test_every_served_builtin_has_a_column_set_whose_rows_match_it() -> None:
    for rt in BUILTINS:
        columns, rows = table.rows_for(rt, [{"metadata": {"name": "x"}}], NOW)
        assert len(rows[0]["cells"]) == len(columns), rt.kind
        assert columns[0]["name"] in ("Name", "Last Seen"), rt.kind


# --- the Table object -----------------------------------------------------------------------------


@pytest.fixture
def server() -> ApiServer:
    srv = ApiServer()
    srv.api.clock = lambda: NOW
    return srv


def test_table_object_for_a_list(server: ApiServer) -> None:
    rt = builtin("", "Namespace")
    objs = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "a", "creationTimestamp": ago(seconds=5), "resourceVersion": "7"},
        }
    ]
    got = table.to_table(
        server.api, rt, objs, options("/api/v1/namespaces"), list_rv="9", continue_token="abc", remaining=4
    )
    assert got["kind"] == "Table" and got["apiVersion"] == "meta.k8s.io/v1"
    assert got["metadata"] == {"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4}
    assert [c["name"] for c in got["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert set(got["columnDefinitions"][0]) == {"name", "type", "format", "description", "priority"}
    row = got["rows"][0]
    assert row["cells"] == ["a", "", "5s"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": objs[0]["metadata"],
    }


def test_table_include_object_and_headers(server: ApiServer) -> None:
    rt = builtin("", "ConfigMap")
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "d"}}
    full = table.to_table(server.api, rt, [obj], options("/x?includeObject=Object"), list_rv="1")
    assert full["rows"][0]["object"] is obj
    none = table.to_table(server.api, rt, [obj], options("/x?includeObject=None"), list_rv="1")
    assert none["rows"][0]["object"] is None
    beta = table.to_table(
        server.api,
        rt,
        [obj],
        options(accept="application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
        list_rv="1",
        include_column_definitions=False,
    )
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["columnDefinitions"] is None
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert "continue" not in beta["metadata"] and "remainingItemCount" not in beta["metadata"]
    empty = table.to_table(server.api, rt, [], options(), list_rv="3")
    assert empty["rows"] == [] and empty["columnDefinitions"]


def test_age_follows_the_server_clock(server: ApiServer) -> None:
    rt = builtin("", "Namespace")
    obj = {"metadata": {"name": "a", "creationTimestamp": ago(seconds=0)}}
    assert table.to_table(server.api, rt, [obj], options(), list_rv="1")["rows"][0]["cells"][2] == "0s"
    server.api.clock = lambda: NOW + timedelta(hours=3, minutes=4)
    assert table.to_table(server.api, rt, [obj], options(), list_rv="1")["rows"][0]["cells"][2] == "3h4m"


def test_selector_formatting() -> None:
    assert printing.format_labels({}) == "<none>"
    assert printing.format_labels({"b": "1", "a": "2"}) == "a=2,b=1"
    selector = {
        "matchLabels": {"z": "1"},
        "matchExpressions": [
            {"key": "a", "operator": "NotIn", "values": ["y", "x"]},
            {"key": "m", "operator": "Exists"},
            {"key": "n", "operator": "DoesNotExist"},
        ],
    }
    assert printing.selector_string(selector) == "a notin (x,y),m,!n,z=1"
    # kube's String() verbatim: duplicate values stay; same-key requirements keep matchLabels first.
    dup = {
        "matchLabels": {"a": "1"},
        "matchExpressions": [{"key": "a", "operator": "In", "values": ["y", "x", "y"]}],
    }
    assert printing.selector_string(dup) == "a=1,a in (x,y,y)"
    assert printing.selector_string(None) == printing.selector_string({}) == ""
    assert (
        printing.selector_string({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
        == "<error>"
    )
