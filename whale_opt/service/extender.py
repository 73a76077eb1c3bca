"""The Kubernetes scheduler-extender protocol (k8s.io/kube-scheduler/extender/v1).

kube-scheduler POSTs ``ExtenderArgs`` (``Pod``, and ``Nodes`` or, when the
extender is ``nodeCacheCapable``, ``NodeNames``) to ``urlPrefix/filter`` and
``urlPrefix/prioritize``; it wants ``ExtenderFilterResult`` (``Nodes`` or
``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``)
and a ``HostPriorityList`` (``[{"Host", "Score"}]``, scores 0..10) back, with
status 200. The Go types carry no JSON tags, so the keys are the Go field
names, capitalised exactly so.

A pod is a whale_opt job when it carries ``whale-opt.io/job-id`` (an
annotation, or a label); its cluster is the URL's
(``/extender/v1/clusters/NAME``) or the pod's ``whale-opt.io/cluster``. For
a gang over several nodes, ``whale-opt.io/node-index`` (0, 1, ...) pins each
pod to its node, in the order of the job's GPUs. Pods without a job id pass
untouched (all nodes, score 0).

Filter: a running job's pod passes on the nodes its round placed it on; a
queued job's pod passes nowhere, each node failing with why the job waits
(its latest decision's plan or reason, and :func:`whale_opt.explain.explain`'s
reasons). Failures are reported as *unresolvable*: whale_opt decides
preemption itself, and kube-scheduler's own preemption would evict pods for
a placement whale_opt has not made. No bind verb: kube-scheduler's binder
binds to the node the filter left; GPU ids are at ``GET
/v1/clusters/{name}/jobs/{job_id}`` for the device plugin.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from whale_opt.decision import Action
from whale_opt.service import work
from whale_opt.service.auth import Role
from whale_opt.service.cluster import ClusterRuntime
from whale_opt.service.core import Service
from whale_opt.service.errors import ApiError
from whale_opt.service.models import ClusterName
from whale_opt.service.routing import guarded, service_of

JOB_KEY = "whale-opt.io/job-id"
CLUSTER_KEY = "whale-opt.io/cluster"
NODE_INDEX_KEY = "whale-opt.io/node-index"
MAX_PRIORITY = 10  # extenderv1.MaxExtenderPriority
EXPLAINED_KEPT = 256

router = APIRouter(prefix="/extender/v1", tags=["kubernetes scheduler extender"])


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class ObjectMeta(_Open):
    """The part of metav1.ObjectMeta read here (everything else is kept)."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None


class KubeObject(_Open):
    """A v1.Pod or v1.Node: its metadata read, the rest passed through."""

    metadata: ObjectMeta = ObjectMeta()


class NodeList(_Open):
    """v1.NodeList."""

    items: list[KubeObject] | None = None


class ExtenderArgs(BaseModel):
    """extenderv1.ExtenderArgs, as kube-scheduler marshals it."""

    model_config = ConfigDict(strict=True)

    Pod: KubeObject | None = None
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None


class ExtenderFilterResult(BaseModel):
    """extenderv1.ExtenderFilterResult."""

    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = {}
    FailedAndUnresolvableNodes: dict[str, str] = {}
    Error: str = ""


class HostPriority(BaseModel):
    """extenderv1.HostPriority."""

    Host: str
    Score: int


@dataclass(frozen=True)
class Placement:
    """Where a pod may go: ``allowed`` nodes (None: not a whale_opt pod), else why not."""

    allowed: frozenset[str] | None
    why_not: str = ""
    cluster: ClusterRuntime | None = None
    error: str = ""


def _tag(pod: KubeObject | None, key: str) -> str | None:
    if pod is None:
        return None
    meta = pod.metadata
    return (meta.annotations or {}).get(key) or (meta.labels or {}).get(key)


async def _explained(service: Service, runtime: ClusterRuntime, job_id: str) -> list[str]:
    """explain's reasons for queued ``job_id`` (cached per cluster state; [] if slow)."""
    cache: OrderedDict[tuple[int, str], list[str]] = runtime.explained
    slot = (runtime.seq, job_id)
    if slot not in cache:
        async with runtime.lock:
            instance = runtime.scheduler.snapshot(runtime.clock)
        try:
            cache[slot] = await service.pool.run(
                service.config.extender_timeout_s, work.explain_job, instance, job_id
            )
        except (ApiError, KeyError, ValueError):
            return []  # the decision's own words still answer
        while len(cache) > EXPLAINED_KEPT:
            cache.popitem(last=False)
    return cache[slot]


def _waiting(runtime: ClusterRuntime, job_id: str, reasons: list[str]) -> str:
    latest = runtime.latest
    item = (
        None
        if latest is None
        else next((it for it in latest.decision.jobs if it.id == job_id), None)
    )
    if latest is None or item is None:
        head = f"whale-opt job {job_id} is queued: no round has started it yet"
    elif item.action is Action.PLANNED and item.start_s is not None:
        head = (
            f"whale-opt planned job {job_id} to start at t={latest.now + item.start_s}"
            f" on {', '.join(item.nodes)}"
        )
    else:
        head = f"whale-opt {item.action.value} job {job_id}: {item.reason or 'not started'}"
    return "; ".join([head, *reasons[:3]])[:1000]


async def _placement(service: Service, pod: KubeObject | None, cluster: str | None) -> Placement:
    job_id = _tag(pod, JOB_KEY)
    if job_id is None:
        return Placement(None)
    cluster = cluster or _tag(pod, CLUSTER_KEY)
    if cluster is None:
        return Placement(frozenset(), error=f"pod of job {job_id} names no {CLUSTER_KEY}")
    runtime = service.clusters.get(cluster)
    if runtime is None:
        return Placement(frozenset(), error=f"no whale-opt cluster {cluster!r}")
    async with runtime.lock:
        held = runtime.scheduler.running.get(job_id)
        queued = job_id in runtime.scheduler.queue
    if held is not None:
        nodes = list(dict.fromkeys(gpu.rpartition("/")[0] for gpu in held.gpus))
        index = _tag(pod, NODE_INDEX_KEY)
        if index is not None and index.isascii() and index.isdigit() and int(index) < len(nodes):
            nodes = [nodes[int(index)]]
        why = f"whale-opt placed job {job_id} on {', '.join(nodes)}"
        return Placement(frozenset(nodes), why, runtime)
    if not queued:
        why = f"job {job_id} is not known to whale-opt cluster {cluster!r} (submit it first)"
        return Placement(frozenset(), why, runtime)
    reasons = await _explained(service, runtime, job_id)
    return Placement(frozenset(), _waiting(runtime, job_id, reasons), runtime)


def _candidates(args: ExtenderArgs) -> list[str]:
    if args.NodeNames is not None:
        return list(args.NodeNames)
    items = [] if args.Nodes is None else args.Nodes.items or []
    return [node.metadata.name for node in items]


async def _filter(request: Request, args: ExtenderArgs, cluster: str | None) -> JSONResponse:
    place = await _placement(service_of(request), args.Pod, cluster)
    names = _candidates(args)
    if place.error:
        result: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": place.error,
        }
        return JSONResponse(result)
    known = {} if place.cluster is None else place.cluster.scheduler.nodes
    cluster_name = "" if place.cluster is None else place.cluster.name
    passed, unresolvable = [], {}
    for name in names:
        if place.allowed is None or name in place.allowed:
            passed.append(name)
        elif name not in known:
            unresolvable[name] = f"not a node of whale-opt cluster {cluster_name!r}"
        else:
            unresolvable[name] = place.why_not
    result = {"FailedNodes": {}, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
    if args.NodeNames is not None:
        result.update(Nodes=None, NodeNames=passed)
    else:
        keep = set(passed)
        items = [] if args.Nodes is None else args.Nodes.items or []
        kept = [
            n.model_dump(mode="json", exclude_unset=True) for n in items if n.metadata.name in keep
        ]
        result.update(Nodes={"metadata": {}, "items": kept}, NodeNames=None)
    return JSONResponse(result)


async def _prioritize(request: Request, args: ExtenderArgs, cluster: str | None) -> JSONResponse:
    place = await _placement(service_of(request), args.Pod, cluster)
    allowed = place.allowed or frozenset()
    scores = [
        {"Host": name, "Score": MAX_PRIORITY if name in allowed else 0}
        for name in _candidates(args)
    ]
    return JSONResponse(scores)


_FILTER = guarded(Role.READ, response_model=ExtenderFilterResult)
_PRIORITIZE = guarded(Role.READ, response_model=list[HostPriority])


@router.post("/filter", summary="Filter (cluster named by the pod)", **_FILTER)
async def filter_nodes(request: Request, args: ExtenderArgs) -> JSONResponse:
    """ExtenderArgs in, ExtenderFilterResult out."""
    return await _filter(request, args, None)


@router.post("/prioritize", summary="Prioritize (cluster named by the pod)", **_PRIORITIZE)
async def prioritize_nodes(request: Request, args: ExtenderArgs) -> JSONResponse:
    """ExtenderArgs in, HostPriorityList out."""
    return await _prioritize(request, args, None)


@router.post("/clusters/{name}/filter", summary="Filter (cluster in the URL)", **_FILTER)
async def filter_nodes_of(request: Request, name: ClusterName, args: ExtenderArgs) -> JSONResponse:
    """ExtenderArgs in, ExtenderFilterResult out."""
    return await _filter(request, args, name)


@router.post(
    "/clusters/{name}/prioritize", summary="Prioritize (cluster in the URL)", **_PRIORITIZE
)
async def prioritize_nodes_of(
    request: Request, name: ClusterName, args: ExtenderArgs
) -> JSONResponse:
    """ExtenderArgs in, HostPriorityList out."""
    return await _prioritize(request, args, name)
