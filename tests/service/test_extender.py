"""The Kubernetes scheduler extender, fed payloads built as kube-scheduler marshals them.

kube-scheduler (pkg/scheduler/extender.go) POSTs ``json.Marshal(ExtenderArgs)``:
the Go struct has no JSON tags, so the keys are ``Pod``, ``Nodes`` and
``NodeNames``, and the field it does not fill is ``null``. ``Pod`` and the
``Nodes`` items are full v1.Pod / v1.Node objects; with ``nodeCacheCapable``
only ``NodeNames`` is sent and expected back.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def pod(
    job_id: str | None, cluster: str | None = "c", index: int | str | None = None
) -> dict[str, Any]:
    """A pending v1.Pod as the API server stores it (and kube-scheduler marshals it)."""
    annotations = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    if job_id is not None:
        annotations["whale-opt.io/job-id"] = job_id
    if index is not None:
        annotations["whale-opt.io/node-index"] = str(index)
    labels = (
        {"app": "trainer"}
        if cluster is None
        else {"app": "trainer", "whale-opt.io/cluster": cluster}
    )
    return {
        "metadata": {
            "name": f"{job_id or 'web'}-worker-0",
            "namespace": "ml",
            "uid": "5f2b1c7e-7d1e-4a8e-9a55-3f1c2d3e4f50",
            "resourceVersion": "48213",
            "creationTimestamp": "2026-01-10T09:00:00Z",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job_id or "web",
                    "uid": "0d7f5b1e-1111-2222-3333-444455556666",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "registry.example/train:1.4",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "2"},
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def node(name: str) -> dict[str, Any]:
    """A v1.Node as kube-scheduler's cache holds it."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1021",
            "creationTimestamp": "2025-12-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {
                "cpu": "96",
                "memory": "1056300000Ki",
                "nvidia.com/gpu": "8",
                "pods": "110",
            },
            "allocatable": {
                "cpu": "95",
                "memory": "1050000000Ki",
                "nvidia.com/gpu": "8",
                "pods": "110",
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-01-10T08:59:00Z",
                    "lastTransitionTime": "2025-12-01T00:05:00Z",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}],
            "nodeInfo": {"kubeletVersion": "v1.31.2", "architecture": "amd64"},
        },
    }


def args(the_pod: dict[str, Any], names: list[str], cache_capable: bool) -> dict[str, Any]:
    """ExtenderArgs exactly as json.Marshal writes it (the unused field is null)."""
    if cache_capable:
        return {"Pod": the_pod, "Nodes": None, "NodeNames": names}
    return {
        "Pod": the_pod,
        "Nodes": {"metadata": {}, "items": [node(n) for n in names]},
        "NodeNames": None,
    }


@pytest.fixture
def cluster(client: TestClient, hetero_raw: dict[str, Any]) -> dict[str, Any]:
    """Cluster ``c`` after one round: some jobs running, some planned."""
    assert (
        client.post("/v1/clusters", json={"name": "c", "instance": hetero_raw}).status_code == 201
    )
    decided = client.post("/v1/clusters/c/decide", json={"now": 10})
    assert decided.status_code == 200
    state = client.get("/v1/clusters/c").json()
    return {
        "state": state,
        "decision": decided.json(),
        "nodes": [n["id"] for n in hetero_raw["nodes"]],
    }


@pytest.mark.parametrize("cache_capable", [True, False])
def test_filter_passes_the_nodes_of_the_round(
    client: TestClient, cluster: dict[str, Any], cache_capable: bool
) -> None:
    job = cluster["state"]["running_jobs"][0]
    names = [*cluster["nodes"], "cpu-only-7"]
    answer = client.post("/extender/v1/filter", json=args(pod(job["id"]), names, cache_capable))
    assert answer.status_code == 200
    result = answer.json()
    assert set(result) == FILTER_KEYS and result["Error"] == ""
    if cache_capable:
        assert result["Nodes"] is None and result["NodeNames"] == job["nodes"]
    else:
        assert result["NodeNames"] is None
        assert result["Nodes"]["items"] == [node(n) for n in job["nodes"]]  # echoed intact
    failed = result["FailedAndUnresolvableNodes"]
    assert set(failed) == set(names) - set(job["nodes"]) and result["FailedNodes"] == {}
    assert "not a node of whale-opt cluster" in failed["cpu-only-7"]
    assert f"placed job {job['id']}" in failed[next(n for n in names if n not in job["nodes"])]


def test_a_queued_job_passes_nowhere_and_says_why(
    client: TestClient, cluster: dict[str, Any]
) -> None:
    planned = next(j for j in cluster["decision"]["jobs"] if j["action"] == "planned")
    names = cluster["nodes"][:3]
    result = client.post(
        "/extender/v1/clusters/c/filter", json=args(pod(planned["id"], None), names, True)
    ).json()
    assert result["NodeNames"] == [] and result["Error"] == ""
    reasons = result["FailedAndUnresolvableNodes"]
    assert set(reasons) == set(names)
    assert all(f"planned job {planned['id']} to start at t=" in text for text in reasons.values())
    assert all(len(text.split("; ")) >= 2 for text in reasons.values())  # explain's reasons too
    scores = client.post(
        "/extender/v1/clusters/c/prioritize", json=args(pod(planned["id"], None), names, True)
    )
    assert scores.json() == [{"Host": n, "Score": 0} for n in names]


def test_prioritize_scores_the_placed_nodes(client: TestClient, cluster: dict[str, Any]) -> None:
    job = cluster["state"]["running_jobs"][0]
    names = cluster["nodes"]
    for cache_capable in (True, False):
        answer = client.post(
            "/extender/v1/prioritize", json=args(pod(job["id"]), names, cache_capable)
        )
        assert answer.status_code == 200
        assert answer.json() == [
            {"Host": n, "Score": 10 if n in job["nodes"] else 0} for n in names
        ]


def test_node_index_pins_each_pod_of_a_gang(client: TestClient) -> None:
    two_nodes = {
        "format": "whale-opt/instance@1",
        "name": "gang",
        "gpu_types": {"H100": {"memory_gb": 80}},
        "nodes": [
            {"id": f"h{k}", "gpu_type": "H100", "gpus": 8, "nvlink": "nvswitch", "rack": "r1"}
            for k in range(2)
        ],
        "queue": [{"id": "big", "gpus": 16, "duration_s": 3600, "topology": "rack"}],
    }
    assert client.post("/v1/clusters", json={"name": "g", "instance": two_nodes}).status_code == 201
    decided = client.post("/v1/clusters/g/decide", json={"now": 0}).json()
    assert decided["jobs"][0]["action"] == "start"
    nodes = client.get("/v1/clusters/g/jobs/big").json()["nodes"]
    assert len(nodes) == 2
    for index, expected in enumerate(nodes):
        payload = args(pod("big", "g", index=index), ["h0", "h1"], True)
        result = client.post("/extender/v1/filter", json=payload).json()
        assert result["NodeNames"] == [expected]
        assert list(result["FailedAndUnresolvableNodes"]) == [n for n in nodes if n != expected]
    unpinned = client.post("/extender/v1/filter", json=args(pod("big", "g"), ["h0", "h1"], True))
    assert sorted(unpinned.json()["NodeNames"]) == ["h0", "h1"]
    # Not an index: the pod may go on any of the job's nodes (a "²" was a 500).
    for index in ("\u00b2", "-1", "x"):
        payload = args(pod("big", "g", index=index), ["h0", "h1"], True)
        answer = client.post("/extender/v1/filter", json=payload)
        assert answer.status_code == 200 and sorted(answer.json()["NodeNames"]) == ["h0", "h1"]


def test_other_pods_pass_untouched_and_errors_are_reported(
    client: TestClient, cluster: dict[str, Any]
) -> None:
    names = cluster["nodes"][:4]
    result = client.post("/extender/v1/filter", json=args(pod(None), names, True)).json()
    assert result["NodeNames"] == names and result["FailedAndUnresolvableNodes"] == {}
    scores = client.post("/extender/v1/prioritize", json=args(pod(None), names, False)).json()
    assert scores == [{"Host": n, "Score": 0} for n in names]
    result = client.post("/extender/v1/filter", json=args(pod("x", "nowhere"), names, True)).json()
    assert "no whale-opt cluster 'nowhere'" in result["Error"]
    result = client.post("/extender/v1/filter", json=args(pod("x", None), names, True)).json()
    assert "whale-opt.io/cluster" in result["Error"]
    result = client.post(
        "/extender/v1/filter", json=args(pod("never-submitted"), names, True)
    ).json()
    assert result["NodeNames"] == [] and "submit it first" in next(
        iter(result["FailedAndUnresolvableNodes"].values())
    )


def test_go_marshalled_edge_cases(client: TestClient, cluster: dict[str, Any]) -> None:
    """Empty candidate lists and a pod with no annotations at all (Go omits them)."""
    bare = copy.deepcopy(pod(None))
    del bare["metadata"]["annotations"], bare["metadata"]["labels"]
    result = client.post(
        "/extender/v1/filter", json={"Pod": bare, "Nodes": None, "NodeNames": []}
    ).json()
    assert result["NodeNames"] == [] and result["Error"] == ""
    empty = {"Pod": bare, "Nodes": {"metadata": {}, "items": []}, "NodeNames": None}
    assert client.post("/extender/v1/filter", json=empty).json()["Nodes"]["items"] == []
    assert client.post("/extender/v1/prioritize", json=empty).json() == []
