"""Leader and worker templates per backend: the exact commands, env, volumes and probes a user's LWS
pods get, and — run through the kubelet's expansion and a real ``/bin/sh`` — what the programs in them
would receive."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from aiplane.controllers.dynamo.multinode import MultinodeInput, multinode_templates
from aiplane.controllers.dynamo.podtemplate import PodTemplateOptions, build_pod_template
from tests.unit.dynamo_multinode.shell import expand, run_script

Obj = dict[str, Any]
SECRET = "mpi-run-ssh-secret"
LEADER_ENV = {"LWS_LEADER_ADDRESS": "llm-0.llm.ns", "LWS_GROUP_SIZE": "3", "LWS_WORKER_INDEX": "0"}
WORKER_ENV = {**LEADER_ENV, "LWS_WORKER_INDEX": "2"}
PROBES = {
    "livenessProbe": {"httpGet": {"path": "/live", "port": "system"}},
    "readinessProbe": {"httpGet": {"path": "/health", "port": "system"}},
    "startupProbe": {"httpGet": {"path": "/live", "port": "system"}},
}


def template(args: list[str], command: list[str] | None = None, **main: Any) -> Obj:
    container = {
        "name": "main",
        "command": ["/bin/sh", "-c"] if command is None else command,
        "args": args,
        "env": [{"name": "DYN_NAMESPACE", "value": "dyn"}],
        **PROBES,
        **main,
    }
    sidecar = {"name": "sidecar", "image": "busybox"}
    return {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [container, sidecar]}}


def main(tpl: Obj) -> Obj:
    found: Obj = tpl["spec"]["containers"][0]
    assert found["name"] == "main"
    return found


def split(tpl: Obj, backend: str | None, nodes: int = 3, gpus: int = 8) -> tuple[Obj, Obj]:
    return multinode_templates(tpl, MultinodeInput(backend, nodes, gpus, SECRET))


def probes(container: Obj) -> set[str]:
    return {key for key in container if key.endswith("Probe")}


def sh_args(
    args: list[str], env: dict[str, str], home: Path, stubs: tuple[str, ...] = ("python3",)
) -> list[str]:
    """What the stubs receive when the kubelet expands ``args[0]`` and ``/bin/sh -c`` runs it."""
    return run_script(expand(args[0], env), env, stubs, home)


# --- vLLM ----------------------------------------------------------------------------------------------

VLLM_TP16 = "python3 -m dynamo.vllm --model Qwen/Qwen3-32B --tensor-parallel-size 16"


def test_vllm_ray_leader_starts_the_head_then_the_original_command_and_workers_join_it() -> None:
    leader, worker = split(template([VLLM_TP16]), "vllm")
    assert main(leader)["command"] == ["sh", "-c"]
    assert main(leader)["args"] == [f"ray start --head --port=6379 && /bin/sh -c '{VLLM_TP16}'"]
    assert main(worker)["command"] == ["sh", "-c"]
    assert main(worker)["args"] == ["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]
    assert probes(main(leader)) == set(PROBES)
    assert probes(main(worker)) == set()


def test_vllm_ray_leader_really_runs_the_python_command_after_ray(tmp_path: Path) -> None:
    """Upstream joined ``/bin/sh -c`` and the script unquoted: ``sh -c python3 …`` runs a bare python3."""
    leader, worker = split(template([VLLM_TP16]), "vllm")
    ran = sh_args(main(leader)["args"], LEADER_ENV, tmp_path, ("ray", "python3"))
    assert ran == ["ray", "start", "--head", "--port=6379", "python3", *VLLM_TP16.split()[1:]]
    joined = sh_args(main(worker)["args"], WORKER_ENV, tmp_path, ("ray",))
    assert joined == ["ray", "start", "--address=llm-0.llm.ns:6379", "--block"]


def test_vllm_ray_leader_with_a_python_argv_keeps_each_argument_whole(tmp_path: Path) -> None:
    args = ["--model", "/models/my model", "--pipeline-parallel-size", "2", "--tensor-parallel-size", "8"]
    leader, _ = split(template(args, ["python3", "-m", "dynamo.vllm"]), "vllm")
    assert main(leader)["args"] == [
        "ray start --head --port=6379 && python3 -m dynamo.vllm --model '/models/my model' "
        "--pipeline-parallel-size 2 --tensor-parallel-size 8"
    ]
    ran = sh_args(main(leader)["args"], LEADER_ENV, tmp_path, ("ray", "python3"))
    assert ran[4:] == ["python3", "-m", "dynamo.vllm", *args]


VLLM_DP = "python3 -m dynamo.vllm --model m --tensor-parallel-size 2 --data-parallel-size 12"


def test_vllm_data_parallel_adds_coordination_flags_with_rank_zero_on_the_leader() -> None:
    leader, worker = split(template([VLLM_DP]), "vllm")
    flags = "--data-parallel-address $(LWS_LEADER_ADDRESS) --data-parallel-size-local 4 --data-parallel-rpc-port 13445"
    assert main(leader)["command"] == ["/bin/sh", "-c"]
    assert main(leader)["args"] == [
        f"python3 -m dynamo.vllm {flags} --data-parallel-start-rank 0 "
        "--model m --tensor-parallel-size 2 --data-parallel-size 12"
    ]
    assert main(worker)["args"] == [
        f"python3 -m dynamo.vllm {flags} --data-parallel-start-rank $(( 4 * $LWS_WORKER_INDEX )) "
        "--model m --tensor-parallel-size 2 --data-parallel-size 12"
    ]
    assert probes(main(leader)) == set(PROBES)
    assert probes(main(worker)) == set()


def test_vllm_data_parallel_worker_start_rank_is_local_size_times_its_index(tmp_path: Path) -> None:
    _, worker = split(template([VLLM_DP]), "vllm")
    ran = sh_args(main(worker)["args"], WORKER_ENV, tmp_path)
    assert ran[ran.index("--data-parallel-start-rank") + 1] == "8"
    assert ran[ran.index("--data-parallel-address") + 1] == "llm-0.llm.ns"


def test_upstream_start_rank_form_is_not_expanded_by_the_kubelet() -> None:
    """Why we write ``$LWS_WORKER_INDEX``: the kubelet reads ``$((…)`` as one unknown variable."""
    upstream = "--data-parallel-start-rank $(( 4 * $(LWS_WORKER_INDEX) ))"
    assert expand(upstream, WORKER_ENV) == upstream
    assert expand("--node-rank $(LWS_WORKER_INDEX)", WORKER_ENV) == "--node-rank 2"


def test_vllm_data_parallel_with_a_python_argv_wraps_it_in_a_shell(tmp_path: Path) -> None:
    args = ["--model", "m", "--data-parallel-size", "16"]
    leader, worker = split(template(args, ["python3", "-m", "dynamo.vllm"]), "vllm", nodes=2)
    flags = "--data-parallel-address $(LWS_LEADER_ADDRESS) --data-parallel-size-local 8 --data-parallel-rpc-port 13445"
    assert main(leader)["command"] == ["sh", "-c"]
    assert main(leader)["args"] == [
        f"exec python3 -m dynamo.vllm --model m --data-parallel-size 16 {flags} --data-parallel-start-rank 0"
    ]
    ran = sh_args(main(worker)["args"], {**WORKER_ENV, "LWS_WORKER_INDEX": "1"}, tmp_path)
    assert ran[-2:] == ["--data-parallel-start-rank", "8"]


def test_vllm_engine_fitting_one_node_gets_no_flags_but_workers_lose_probes() -> None:
    tpl = template(["python3 -m dynamo.vllm --model m --tensor-parallel-size 4"])
    leader, worker = split(tpl, "vllm")
    assert main(leader) == main(tpl)
    assert main(worker)["args"] == main(tpl)["args"]
    assert probes(main(worker)) == set()


# --- SGLang --------------------------------------------------------------------------------------------

SGLANG = "python3 -m dynamo.sglang --model-path m --tp 24 | tee /tmp/log"


def test_sglang_adds_dist_init_flags_after_the_python_command_before_the_pipe() -> None:
    leader, worker = split(template([SGLANG]), "sglang")
    dist = "--dist-init-addr $(LWS_LEADER_ADDRESS):29500 --nnodes 3"
    assert main(leader)["args"] == [
        f"python3 -m dynamo.sglang {dist} --node-rank 0 --model-path m --tp 24 | tee /tmp/log"
    ]
    assert main(worker)["args"] == [
        f"python3 -m dynamo.sglang {dist} --node-rank $(LWS_WORKER_INDEX) --model-path m --tp 24 | tee /tmp/log"
    ]
    assert main(worker)["command"] == main(leader)["command"] == ["/bin/sh", "-c"]
    assert probes(main(leader)) == set(PROBES)
    assert probes(main(worker)) == set()


def test_sglang_worker_gets_its_rank_and_the_leader_address(tmp_path: Path) -> None:
    _, worker = split(template(["python3 -m dynamo.sglang --model-path m --tp 24"]), "sglang")
    ran = sh_args(main(worker)["args"], WORKER_ENV, tmp_path)
    assert ran[3:9] == ["--dist-init-addr", "llm-0.llm.ns:29500", "--nnodes", "3", "--node-rank", "2"]


def test_sglang_python_argv_appends_on_the_leader_and_wraps_the_worker_in_a_shell() -> None:
    args = ["--model-path", "m", "--tp", "16"]
    leader, worker = split(template(args, ["python3", "-m", "dynamo.sglang"]), "sglang", nodes=2)
    dist = ["--dist-init-addr", "$(LWS_LEADER_ADDRESS):29500", "--nnodes", "2", "--node-rank"]
    assert main(leader)["command"] == ["python3", "-m", "dynamo.sglang"]
    assert main(leader)["args"] == [*args, *dist, "0"]
    assert main(worker)["command"] == ["sh", "-c"]
    assert main(worker)["args"] == [
        "exec python3 -m dynamo.sglang --model-path m --tp 16 "
        "--dist-init-addr $(LWS_LEADER_ADDRESS):29500 --nnodes 2 --node-rank $(LWS_WORKER_INDEX)"
    ]


# --- TRT-LLM -------------------------------------------------------------------------------------------

TRTLLM = "python3 -m dynamo.trtllm --model-path m --extra-engine-args /cfg/e.yaml"
SSH_KEYS = (
    "ls -la /ssh-pk/ && cp /ssh-pk/private.key ~/.ssh/id_rsa && cp /ssh-pk/private.key.pub ~/.ssh/id_rsa.pub"
    " && cp /ssh-pk/private.key.pub ~/.ssh/authorized_keys && chmod 600 ~/.ssh/id_rsa ~/.ssh/authorized_keys"
    " && chmod 644 ~/.ssh/id_rsa.pub ~/.ssh/authorized_keys"
    " && printf 'Host *\\nIdentityFile ~/.ssh/id_rsa\\nStrictHostKeyChecking no\\nPort 2222\\n' > ~/.ssh/config"
)
FORWARDED = (
    "-x CUDA_VISIBLE_DEVICES -x DYN_NAMESPACE -x HF_DATASETS_CACHE -x HF_ENDPOINT -x HF_HOME -x HF_TOKEN"
    " -x HOME -x HUGGING_FACE_HUB_TOKEN -x LD_LIBRARY_PATH -x MODEL_PATH -x NCCL_DEBUG -x NCCL_IB_DISABLE"
    " -x NCCL_P2P_DISABLE -x OMPI_MCA_orte_keep_fqdn_hostnames -x PATH -x PYTHONPATH"
    " -x TENSORRT_LLM_CACHE_DIR -x TOKENIZERS_PARALLELISM -x TRANSFORMERS_CACHE -x USER"
)
HOSTS = (
    "$(LWS_LEADER_ADDRESS),$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-1\\./'),"
    "$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-2\\./')"
)


def test_trtllm_leader_sets_up_ssh_and_runs_mpirun_over_all_gpus() -> None:
    leader, _ = split(template([TRTLLM]), "trtllm")
    assert main(leader)["command"] == ["/bin/sh", "-c"]
    assert main(leader)["args"] == [
        f"mkdir -p ~/.ssh && {SSH_KEYS} && mpirun --oversubscribe -n 24 -H {HOSTS} --mca pml ob1"
        ' --mca plm_rsh_args "-p 2222 -o StrictHostKeyChecking=no -i ~/.ssh/id_rsa"'
        f" {FORWARDED} bash -c 'source /opt/dynamo/venv/bin/activate && trtllm-llmapi-launch {TRTLLM}'"
    ]
    assert probes(main(leader)) == set(PROBES)


def test_trtllm_worker_runs_sshd_on_2222_and_is_ready_when_it_listens() -> None:
    _, worker = split(template([TRTLLM]), "trtllm")
    assert main(worker)["command"] == ["/bin/sh", "-c"]
    assert main(worker)["args"] == [
        f"mkdir -p ~/.ssh ~/.ssh/host_keys ~/.ssh/run && {SSH_KEYS}"
        " && ssh-keygen -t rsa -f ~/.ssh/host_keys/ssh_host_rsa_key -N ''"
        " && ssh-keygen -t ecdsa -f ~/.ssh/host_keys/ssh_host_ecdsa_key -N ''"
        " && ssh-keygen -t ed25519 -f ~/.ssh/host_keys/ssh_host_ed25519_key -N ''"
        " && printf 'Port 2222\\nHostKey ~/.ssh/host_keys/ssh_host_rsa_key\\nHostKey ~/.ssh/host_keys/ssh_host_ecdsa_key"
        "\\nHostKey ~/.ssh/host_keys/ssh_host_ed25519_key\\nPidFile ~/.ssh/run/sshd.pid\\nPermitRootLogin yes"
        "\\nPasswordAuthentication no\\nPubkeyAuthentication yes\\nAuthorizedKeysFile ~/.ssh/authorized_keys\\n'"
        " > ~/.ssh/sshd_config && mkdir -p /run/sshd && /usr/sbin/sshd -D -f ~/.ssh/sshd_config"
    ]
    assert probes(main(worker)) == {"readinessProbe"}
    assert main(worker)["readinessProbe"] == {
        "tcpSocket": {"port": 2222},
        "initialDelaySeconds": 20,
        "periodSeconds": 20,
        "timeoutSeconds": 5,
        "failureThreshold": 10,
    }


def test_trtllm_both_roles_mount_the_ssh_secret_and_keep_fqdn_hostnames() -> None:
    for tpl in split(template([TRTLLM]), "trtllm"):
        assert tpl["spec"]["volumes"] == [
            {"name": SECRET, "secret": {"secretName": SECRET, "defaultMode": 0o644}}
        ]
        assert main(tpl)["volumeMounts"] == [{"name": SECRET, "mountPath": "/ssh-pk", "readOnly": True}]
        assert main(tpl)["env"] == [
            {"name": "DYN_NAMESPACE", "value": "dyn"},
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "1"},
        ]
        assert tpl["spec"]["containers"][1] == {"name": "sidecar", "image": "busybox"}


def test_trtllm_keeps_a_users_fqdn_setting_instead_of_a_duplicate() -> None:
    tpl = template([TRTLLM], env=[{"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "0"}])
    leader, _ = split(tpl, "trtllm")
    assert main(leader)["env"] == [{"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "0"}]


def test_trtllm_leader_hands_mpirun_every_pod_address_and_the_launch(tmp_path: Path) -> None:
    """The host list names only variables LWS sets; upstream's ``$(LWS_WORKER_<i>_ADDRESS)`` did not."""
    command = "python3 -m dynamo.trtllm --served-model-name 'my model'"
    leader, _ = split(template([command]), "trtllm")
    ran = sh_args(main(leader)["args"], LEADER_ENV, tmp_path, ("ls", "cp", "chmod", "mpirun"))
    mpirun = ran[ran.index("mpirun") :]
    assert mpirun[1:6] == ["--oversubscribe", "-n", "24", "-H", "llm-0.llm.ns,llm-0-1.llm.ns,llm-0-2.llm.ns"]
    assert mpirun[-3:] == [
        "bash",
        "-c",
        f"source /opt/dynamo/venv/bin/activate && trtllm-llmapi-launch {command}",
    ]
    assert (tmp_path / ".ssh" / "config").read_text() == (
        "Host *\nIdentityFile ~/.ssh/id_rsa\nStrictHostKeyChecking no\nPort 2222\n"
    )


def test_trtllm_python_argv_is_launched_as_the_same_argv(tmp_path: Path) -> None:
    args = ["--model-path", "m", "--served-model-name", "my model"]
    leader, _ = split(template(args, ["python3", "-m", "dynamo.trtllm"]), "trtllm", nodes=2, gpus=4)
    ran = sh_args(main(leader)["args"], LEADER_ENV, tmp_path, ("ls", "cp", "chmod", "mpirun"))
    assert ran[ran.index("mpirun") + 3] == "8"
    assert ran[-1] == (
        "source /opt/dynamo/venv/bin/activate && trtllm-llmapi-launch "
        "python3 -m dynamo.trtllm --model-path m --served-model-name 'my model'"
    )


# --- no backend, input handling, errors ----------------------------------------------------------------


def test_no_backend_leaves_both_roles_as_the_template() -> None:
    tpl = template(["python3 -m dynamo.frontend"])
    leader, worker = split(tpl, None)
    assert leader == tpl and worker == tpl
    assert leader is not tpl and main(worker) is not main(tpl)


def test_a_pod_template_from_build_pod_template_is_accepted() -> None:
    dcd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "g-worker", "namespace": "ns"},
        "spec": {
            "componentType": "worker",
            "serviceName": "worker",
            "dynamoNamespace": "dyn",
            "multinode": {"nodeCount": 2},
            "resources": {"limits": {"gpu": "8"}},
            "extraPodSpec": {
                "mainContainer": {
                    "image": "sglang",
                    "args": ["python3 -m dynamo.sglang --model-path m --tp 16"],
                }
            },
        },
    }
    tpl = build_pod_template(dcd, PodTemplateOptions())
    before = copy.deepcopy(tpl)
    leader, worker = split(tpl, "sglang", nodes=2)
    assert tpl == before
    assert "--node-rank 0" in main(leader)["args"][0]
    assert "--node-rank $(LWS_WORKER_INDEX)" in main(worker)["args"][0]
    assert probes(main(worker)) == set() and probes(main(leader)) == probes(main(tpl))
    assert leader["metadata"] == worker["metadata"] == tpl["metadata"]


@pytest.mark.parametrize(
    ("tpl", "inp", "field"),
    [
        (template(["x"]), MultinodeInput("vllm", 1, 8, SECRET), "spec.multinode.nodeCount"),
        (template(["x"]), MultinodeInput("vllm", 2, 0, SECRET), "spec.resources.limits.gpu"),
        (template(["x"]), MultinodeInput("trtllm", 2, 8, ""), "--mpi-run-ssh-secret-name"),
        (template(["x"]), MultinodeInput("jax", 2, 8, SECRET), "backend"),
        (template([]), MultinodeInput("sglang", 2, 8, SECRET), "spec.extraPodSpec.mainContainer.args"),
        (template(["x"], command=[]), MultinodeInput(None, 2, 8, SECRET), "mainContainer.command"),
        ({"spec": {"containers": [{"name": "c"}]}}, MultinodeInput(None, 2, 8, SECRET), "spec.containers"),
        (
            template(["python3 -m dynamo.vllm --tensor-parallel-size 0"]),
            MultinodeInput("vllm", 2, 8, SECRET),
            "--tensor-parallel-size",
        ),
    ],
)
def test_bad_input_is_an_error_naming_the_field(tpl: Obj, inp: MultinodeInput, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        multinode_templates(tpl, inp)
