"""The leader and worker pod templates of a multinode (LeaderWorkerSet) Dynamo component.

Upstream's DCD controller builds the pod template twice, once per role, and lets the backend rewrite
the ``main`` container so the pods of one LWS group find each other (reference ``dynamo.md`` §2,
"Multinode injection per backend"; ``internal/dynamo/{lws,backend_vllm,backend_sglang,
backend_trtllm,utils}.go`` at ``57cdb9a12``). The pods learn their group from the env the LWS webhook
injects: ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` — nothing else.

Addresses use the kubelet's ``$(VAR)`` syntax where the kubelet can expand them (any arg), and the
shell's ``$VAR`` where only a shell can (inside ``$(( ))`` or a command substitution), because the
kubelet reads ``$((…)`` as one unknown variable and leaves everything inside it unexpanded.

Where we depart from ``57cdb9a12`` on purpose (each has a test; ``docs/dynamo-multinode.md``):

* TRT-LLM's mpirun host list names workers ``$(LWS_WORKER_<i>_ADDRESS)``, variables LWS never sets;
  we derive them from ``$LWS_LEADER_ADDRESS`` as upstream's own fix did (#4477, Nov 2025).
* vLLM's data-parallel worker start rank ``$(( n * $(LWS_WORKER_INDEX) ))`` is never expanded (see
  above) and the shell then runs ``LWS_WORKER_INDEX`` as a command; we write ``$LWS_WORKER_INDEX``.
* vLLM's Ray leader joins the original command and args unquoted, so ``/bin/sh -c "python3 …"``
  became ``/bin/sh -c python3 …`` (a bare interpreter); tokens are shell-quoted, as upstream's later
  fix (#6693), with POSIX quoting. The same quoting applies wherever a python argv is put into a shell.
* TRT-LLM wraps the launch in ``bash -c '…'`` without escaping quotes in the user's command; we quote.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiplane.controllers.dynamo.merge import set_env
from aiplane.controllers.dynamo.podtemplate import MAIN_CONTAINER

__all__ = ["MultinodeInput", "multinode_templates"]

LEADER: Final = "leader"
WORKER: Final = "worker"

#: The leader's address as the kubelet expands it in any container arg.
LEADER_ADDRESS: Final = "$(LWS_LEADER_ADDRESS)"
#: This pod's rank in its group (0 on the leader), kubelet syntax.
NODE_RANK: Final = "$(LWS_WORKER_INDEX)"
#: The same rank for a shell, usable inside ``$(( ))``.
NODE_RANK_SHELL: Final = "$LWS_WORKER_INDEX"

RAY_PORT: Final = 6379
SGLANG_PORT: Final = 29500
DATA_PARALLEL_RPC_PORT: Final = 13445
MPI_SSH_PORT: Final = 2222
SSH_MOUNT_PATH: Final = "/ssh-pk"
SSH_SECRET_MODE: Final = 0o644
KEEP_FQDN_ENV: Final = "OMPI_MCA_orte_keep_fqdn_hostnames"

_PROBES: Final = ("livenessProbe", "readinessProbe", "startupProbe")
_PYTHON: Final = re.compile(r"^(.*/)?(python\d*(\.\d+)*)$")
_COMMAND_FIELD: Final = "spec.extraPodSpec.mainContainer"

# mpirun forwards these to every rank on top of the container's own env (upstream's fixed list).
TRTLLM_FORWARDED_ENV: Final = frozenset(
    {
        "CUDA_VISIBLE_DEVICES", "MODEL_PATH", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT",
        "TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
        "TENSORRT_LLM_CACHE_DIR", "HF_HOME", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE",
        "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "HOME", "USER",
    }
)  # fmt: skip

_SSH_KEYS: Final = (
    "ls -la /ssh-pk/",
    "cp /ssh-pk/private.key ~/.ssh/id_rsa",
    "cp /ssh-pk/private.key.pub ~/.ssh/id_rsa.pub",
    "cp /ssh-pk/private.key.pub ~/.ssh/authorized_keys",
    "chmod 600 ~/.ssh/id_rsa ~/.ssh/authorized_keys",
    "chmod 644 ~/.ssh/id_rsa.pub ~/.ssh/authorized_keys",
    f"printf 'Host *\\nIdentityFile ~/.ssh/id_rsa\\nStrictHostKeyChecking no\\nPort {MPI_SSH_PORT}\\n'"
    " > ~/.ssh/config",
)
_SSHD_CONFIG: Final = (
    f"Port {MPI_SSH_PORT}\\nHostKey ~/.ssh/host_keys/ssh_host_rsa_key\\n"
    "HostKey ~/.ssh/host_keys/ssh_host_ecdsa_key\\nHostKey ~/.ssh/host_keys/ssh_host_ed25519_key\\n"
    "PidFile ~/.ssh/run/sshd.pid\\nPermitRootLogin yes\\nPasswordAuthentication no\\n"
    "PubkeyAuthentication yes\\nAuthorizedKeysFile ~/.ssh/authorized_keys\\n"
)
_WORKER_SSHD: Final = (
    "mkdir -p ~/.ssh ~/.ssh/host_keys ~/.ssh/run",
    *_SSH_KEYS,
    "ssh-keygen -t rsa -f ~/.ssh/host_keys/ssh_host_rsa_key -N ''",
    "ssh-keygen -t ecdsa -f ~/.ssh/host_keys/ssh_host_ecdsa_key -N ''",
    "ssh-keygen -t ed25519 -f ~/.ssh/host_keys/ssh_host_ed25519_key -N ''",
    f"printf '{_SSHD_CONFIG}' > ~/.ssh/sshd_config",
    "mkdir -p /run/sshd",
    "/usr/sbin/sshd -D -f ~/.ssh/sshd_config",
)


@dataclass(frozen=True)
class MultinodeInput:
    """What the injection needs besides the pod template."""

    backend: str | None  # "vllm" | "sglang" | "trtllm" | None
    node_count: int
    gpus_per_node: int  # the main container's GPU limit
    ssh_secret: str  # operator flag --mpi-run-ssh-secret-name (DynamoOptions.mpi_ssh_secret)


Container = dict[str, Any]
_Inject = Callable[[dict[str, Any], Container, str, MultinodeInput], None]


def multinode_templates(
    pod_template: dict[str, Any], inp: MultinodeInput
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(leader_template, worker_template) for a LeaderWorkerSet; raises ValueError naming a field."""
    inject = _injector(inp)
    _check(pod_template, inp)
    templates = []
    for role in (LEADER, WORKER):
        template = copy.deepcopy(pod_template)
        inject(template["spec"], _main(template["spec"]), role, inp)
        templates.append(template)
    return templates[0], templates[1]


def _injector(inp: MultinodeInput) -> _Inject:
    if inp.backend is None:
        return _noop
    inject = _BACKENDS.get(inp.backend)
    if inject is None:
        raise ValueError(
            f"backend: unsupported backend framework {inp.backend!r}; expected one of {', '.join(_BACKENDS)} or none"
        )
    return inject


def _check(pod_template: dict[str, Any], inp: MultinodeInput) -> None:
    """Upstream's checks on LWS templates (``checkMainContainer``, the worker's GPU limit)."""
    if inp.node_count < 2:
        raise ValueError(
            f"spec.multinode.nodeCount: is {inp.node_count}; a LeaderWorkerSet needs at least 2 nodes"
        )
    if inp.gpus_per_node < 1:
        raise ValueError(
            "spec.resources.limits.gpu: a multinode (LeaderWorkerSet) component needs a GPU limit"
        )
    if inp.backend == "trtllm" and not inp.ssh_secret:
        raise ValueError("--mpi-run-ssh-secret-name: TRT-LLM multinode needs the mpirun SSH keypair Secret")
    spec = pod_template.get("spec")
    if not isinstance(spec, dict):
        raise ValueError("spec: a pod template needs a spec")
    main = _main(spec)
    for key in ("command", "args"):
        if not main.get(key):
            raise ValueError(f"{_COMMAND_FIELD}.{key}: a LeaderWorkerSet pod's main container needs {key}")


def _main(spec: dict[str, Any]) -> Container:
    for container in spec.get("containers") or []:
        if container.get("name") == MAIN_CONTAINER:
            found: Container = container
            return found
    raise ValueError(f"spec.containers: no container named {MAIN_CONTAINER!r}")


def _noop(spec: dict[str, Any], main: Container, role: str, inp: MultinodeInput) -> None:
    """No backend (frontend, planner, …): upstream's NoopBackend changes nothing, probes included."""


def _drop_probes(main: Container, probes: tuple[str, ...] = _PROBES) -> None:
    for probe in probes:
        main.pop(probe, None)


# --- shared flag injection (upstream utils.go) ---------------------------------------------------------


def _is_python(command: str) -> bool:
    return bool(_PYTHON.match(command))


def _python_cmd_pattern(framework: str) -> re.Pattern[str]:
    # Go's \s is [\t\n\f\r ] and its $ (no m flag) is the end of text.
    return re.compile(rf"(python[0-9.]*[\t\n\f\r ]+[^|&;]*{framework}[^|&;]*?)([\t\n\f\r ]|\Z|[|&;])")


def _inject_flags(main: Container, flags: str, needs_shell: bool, framework: str) -> None:
    """Adds ``flags`` to the python command the container runs.

    A direct python argv gets them appended (through ``sh -c exec`` when they need a shell); a shell
    script gets them right after the first ``python… <framework>…`` command in its first matching arg.
    """
    command: list[str] = list(main["command"])
    args: list[str] = list(main.get("args") or [])
    if _is_python(command[0]):
        if needs_shell:
            main["command"] = ["sh", "-c"]
            main["args"] = [f"exec {shlex.join([*command, *args])} {flags}"]
        else:
            main["args"] = [*args, *flags.split()]
        return
    pattern = _python_cmd_pattern(framework)
    for i, arg in enumerate(args):
        modified = pattern.sub(lambda m: f"{m.group(1)} {flags}{m.group(2)}", arg)
        if modified != arg:
            args[i] = modified
            main["args"] = args
            return


# --- vLLM -----------------------------------------------------------------------------------------------


def _flag_value(tokens: list[str], flag: str) -> int:
    """The first integer after ``flag``, 1 when absent (upstream's ``getFlagValue``)."""
    for i, token in enumerate(tokens[:-1]):
        if token == flag:
            try:
                return int(tokens[i + 1])
            except ValueError:
                continue
    return 1


def _vllm(spec: dict[str, Any], main: Container, role: str, inp: MultinodeInput) -> None:
    """Ray when one engine spans nodes, data-parallel coordination when engines do; else nothing."""
    tokens = [t for arg in main.get("args") or [] for t in arg.split()]
    tp, pp = _flag_value(tokens, "--tensor-parallel-size"), _flag_value(tokens, "--pipeline-parallel-size")
    dp = _flag_value(tokens, "--data-parallel-size")
    for flag, value in (
        ("--tensor-parallel-size", tp),
        ("--pipeline-parallel-size", pp),
        ("--data-parallel-size", dp),
    ):
        if value < 1:
            raise ValueError(f"{_COMMAND_FIELD}.args: {flag} is {value}; it must be at least 1")
    world = tp * pp
    if world > inp.gpus_per_node:
        _vllm_ray(main, role)
    elif world * dp > inp.gpus_per_node:
        _vllm_data_parallel(main, role, inp.gpus_per_node // world)
    if role == WORKER:
        _drop_probes(main)


def _vllm_ray(main: Container, role: str) -> None:
    if role == LEADER:
        original = shlex.join([*main["command"], *(main.get("args") or [])])
        main["args"] = [f"ray start --head --port={RAY_PORT} && {original}"]
    else:
        main["args"] = [f"ray start --address={LEADER_ADDRESS}:{RAY_PORT} --block"]
    main["command"] = ["sh", "-c"]


def _vllm_data_parallel(main: Container, role: str, dp_local: int) -> None:
    start_rank = "0" if role == LEADER else f"$(( {dp_local} * {NODE_RANK_SHELL} ))"
    flags = (
        f"--data-parallel-address {LEADER_ADDRESS} --data-parallel-size-local {dp_local} "
        f"--data-parallel-rpc-port {DATA_PARALLEL_RPC_PORT} --data-parallel-start-rank {start_rank}"
    )
    _inject_flags(main, flags, True, "vllm")


# --- SGLang ---------------------------------------------------------------------------------------------


def _sglang(spec: dict[str, Any], main: Container, role: str, inp: MultinodeInput) -> None:
    rank, needs_shell = ("0", False) if role == LEADER else (NODE_RANK, True)
    flags = f"--dist-init-addr {LEADER_ADDRESS}:{SGLANG_PORT} --nnodes {inp.node_count} --node-rank {rank}"
    if role == WORKER:
        _drop_probes(main)
    _inject_flags(main, flags, needs_shell, "sglang")


# --- TRT-LLM (mpirun over SSH) ------------------------------------------------------------------------


def host_list(node_count: int) -> str:
    """mpirun's ``-H``: the leader, then worker i at the leader's pod name plus ``-i`` (its DNS name).

    LWS names worker pods ``<leader pod>-<i>`` in the leader's subdomain, so inserting ``-i`` before
    the first dot of ``LWS_LEADER_ADDRESS`` gives the worker's address; only a shell can do that.
    """
    workers = [f"$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-{i}\\./')" for i in range(1, node_count)]
    return ",".join([LEADER_ADDRESS, *workers])


def _trtllm(spec: dict[str, Any], main: Container, role: str, inp: MultinodeInput) -> None:
    if role == WORKER:
        _drop_probes(main, ("livenessProbe", "startupProbe"))
        main["readinessProbe"] = {
            "tcpSocket": {"port": MPI_SSH_PORT},
            "initialDelaySeconds": 20,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 10,
        }
    mount = {"name": inp.ssh_secret, "mountPath": SSH_MOUNT_PATH, "readOnly": True}
    main["volumeMounts"] = [*(main.get("volumeMounts") or []), mount]
    set_env(main, KEEP_FQDN_ENV, "1", override=False)
    script = _trtllm_leader(main, inp) if role == LEADER else " && ".join(_WORKER_SSHD)
    main["command"], main["args"] = ["/bin/sh", "-c"], [script]
    volume = {
        "name": inp.ssh_secret,
        "secret": {"secretName": inp.ssh_secret, "defaultMode": SSH_SECRET_MODE},
    }
    spec["volumes"] = [*(spec.get("volumes") or []), volume]


def _trtllm_leader(main: Container, inp: MultinodeInput) -> str:
    command: list[str] = main["command"]
    args: list[str] = main.get("args") or []
    original = shlex.join([*command, *args]) if _is_python(command[0]) else " ".join(args)
    launch = shlex.quote(f"source /opt/dynamo/venv/bin/activate && trtllm-llmapi-launch {original}")
    names = sorted(TRTLLM_FORWARDED_ENV | {e["name"] for e in main.get("env") or []})
    forwarded = " ".join(f"-x {name}" for name in names)
    mpirun = (
        f"mpirun --oversubscribe -n {inp.node_count * inp.gpus_per_node} -H {host_list(inp.node_count)} "
        f'--mca pml ob1 --mca plm_rsh_args "-p {MPI_SSH_PORT} -o StrictHostKeyChecking=no -i ~/.ssh/id_rsa" '
        f"{forwarded} bash -c {launch}"
    )
    return " && ".join(["mkdir -p ~/.ssh", *_SSH_KEYS, mpirun])


_BACKENDS: Final[dict[str, _Inject]] = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}
