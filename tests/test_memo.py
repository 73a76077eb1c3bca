"""Values found by an object's identity: rounds of one unchanged cluster share them."""

from __future__ import annotations

from whale_opt.memo import IdentityMemo
from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.scheduler import Scheduler
from whale_opt.topology import node_topologies


def test_a_memo_finds_the_object_itself_never_an_equal_one_and_keeps_the_last_few() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    made: list[int] = []

    def make(value: int) -> int:
        made.append(value)
        return value

    a, b, c = [1, 2], [1, 2], [3]  # lists: equal literals are never one object
    assert memo.get(a, lambda: make(10)) == 10
    assert memo.get(a, lambda: make(11)) == 10  # found
    assert memo.get(b, lambda: make(12)) == 12  # equal, not the same object
    assert memo.get(c, lambda: make(13)) == 13  # a is now the oldest of three: dropped
    assert memo.get(a, lambda: make(14)) == 14
    assert made == [10, 12, 13, 14]


def _cluster() -> Instance:
    nodes = tuple(Node(f"n{k}", "A100", 8, "nvswitch") for k in range(3))
    return Instance("c", {"A100": GpuType("A100", 80)}, nodes)


def test_rounds_of_an_unchanged_cluster_share_one_node_tuple_and_its_topologies() -> None:
    scheduler = Scheduler(_cluster(), "wspt")
    first, second = scheduler.snapshot(0), scheduler.snapshot(10)
    assert first.nodes is second.nodes
    assert node_topologies(first) is node_topologies(second)
    scheduler.set_node_down("n1")
    third = scheduler.snapshot(20)
    assert third.nodes is not first.nodes and third.nodes[1].down
    assert node_topologies(third)[1].healthy == 0  # the down node's topology, not a stale one
    assert node_topologies(first)[1].healthy != 0


def test_an_instance_travels_without_its_gpu_table_and_finds_its_gpus_after() -> None:
    # The table of GPU ids is the node tuple's: a pool sent to a worker does not
    # carry it (a fifth of its pickle), and the worker builds it on arrival.
    import pickle

    from whale_opt.generate import generate

    instance = generate("hetero", gpus=256, queued=20, seed=3)
    state = instance.__getstate__()
    assert "_gpus" not in state and "_healthy" not in state
    full = pickle.dumps(instance.__dict__)
    data = pickle.dumps(instance)
    assert len(data) < 0.9 * len(full)
    back = pickle.loads(data)
    assert back == instance
    for job in instance.running:
        for gpu in job.gpu_ids:
            assert back.parse_gpu(gpu) == instance.parse_gpu(gpu)
    # Still validated as before on the way out of a replace.
    assert back.replace(queue=back.queue[:3]).gpu_owner == instance.gpu_owner
