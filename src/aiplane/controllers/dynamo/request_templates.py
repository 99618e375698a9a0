"""Built-in base graphs: what a DGDR deploys when ``profilingConfig.configMapRef`` names none.

Upstream's first DGDR release effectively required a base ``disagg.yaml`` in a ConfigMap; its
examples (``components/backends/<backend>/deploy/disagg.yaml``) are all the same shape: an
OpenAI-compatible Frontend, a prefill worker and a decode worker running the backend's runtime image.
These templates are those examples with the model filled in, so a DGDR needs nothing but a model
name. Service names, images and commands are upstream's (Dynamo 0.6.0); the tensor-parallel flag,
the GPU resources and the replica counts are placeholders that :mod:`request_graph` patches from
the plan.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["DEFAULT_SERVICE_NAMES", "RUNTIME_IMAGES", "TP_FLAGS", "base_graph"]

Obj = dict[str, Any]

#: Upstream's runtime images of the first DGDR release.
RUNTIME_IMAGES: Final = {
    "vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0",
    "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.0",
    "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.6.0",
}
#: The flag that sets an engine's tensor-parallel size, per backend (both spellings are accepted
#: when patching a user's base graph; the first is what is written).
TP_FLAGS: Final = {
    "vllm": ("--tensor-parallel-size", "-tp"),
    "sglang": ("--tp", "--tp-size", "--tensor-parallel-size"),
    "trtllm": ("--tensor-parallel-size", "--tp_size"),
}
#: (prefill, decode) service names of upstream's disagg examples: the profiler's fallback when no
#: service declares ``subComponentType``.
DEFAULT_SERVICE_NAMES: Final = {
    "vllm": ("VllmPrefillWorker", "VllmDecodeWorker"),
    "sglang": ("prefill", "decode"),
    "trtllm": ("TRTLLMPrefillWorker", "TRTLLMDecodeWorker"),
}
_WORKDIR: Final = {
    "vllm": "/workspace/components/backends/vllm",
    "sglang": "/workspace/components/backends/sglang",
    "trtllm": "/workspace/components/backends/trtllm",
}


def _worker_command(backend: str, model: str, role: str) -> str:
    if backend == "vllm":
        extra = " --is-prefill-worker" if role == "prefill" else ""
        return f"python3 -m dynamo.vllm --model {model} --tensor-parallel-size 1{extra}"
    if backend == "sglang":
        return (
            f"python3 -m dynamo.sglang --model-path {model} --served-model-name {model} --tp 1 "
            "--trust-remote-code --skip-tokenizer-init "
            f"--disaggregation-mode {role} --disaggregation-transfer-backend nixl"
        )
    return (
        f"python3 -m dynamo.trtllm --model-path {model} --served-model-name {model} "
        f"--extra-engine-args engine_configs/{role}.yaml --tensor-parallel-size 1 "
        f"--disaggregation-mode {role} --disaggregation-strategy decode_first"
    )


def _worker(backend: str, model: str, role: str) -> Obj:
    return {
        "componentType": "worker",
        "subComponentType": role,
        "replicas": 1,
        "envFromSecret": "hf-token-secret",
        "resources": {"limits": {"gpu": "1"}, "requests": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {
                "image": RUNTIME_IMAGES[backend],
                "workingDir": _WORKDIR[backend],
                "command": ["/bin/sh", "-c"],
                "args": [_worker_command(backend, model, role)],
            }
        },
    }


def base_graph(backend: str, model: str, name: str) -> Obj:
    """Upstream's disaggregated example for ``backend``, serving ``model``, named ``name``."""
    prefill, decode = DEFAULT_SERVICE_NAMES[backend]
    frontend = {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {
            "mainContainer": {
                "image": RUNTIME_IMAGES[backend],
                "command": ["/bin/sh", "-c"],
                "args": ["python3 -m dynamo.frontend --http-port 8000"],
            }
        },
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {
            "backendFramework": backend,
            "services": {
                "Frontend": frontend,
                prefill: _worker(backend, model, "prefill"),
                decode: _worker(backend, model, "decode"),
            },
        },
    }
