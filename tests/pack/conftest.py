"""Fixtures of the packing-study tests: the tiny openb excerpt."""

from __future__ import annotations

import pytest

from whale_opt.pack import PackCluster, PodList, read_cluster, read_pods

from .builders import OPENB


@pytest.fixture(scope="session")
def tiny_cluster() -> PackCluster:
    """15 openb GPU nodes, one or more of every model and GPU count."""
    return read_cluster(OPENB / "openb_node_list_gpu_node.csv")


@pytest.fixture(scope="session")
def tiny_pods() -> PodList:
    """60 openb pods: shares, whole and 8-GPU pods, CPU-only ones, model constraints."""
    return read_pods(OPENB / "openb_pod_list_tiny.csv")
