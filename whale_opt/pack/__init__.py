"""The packing study of the FGD paper (Weng et al., USENIX ATC '23), re-run.

GPU-sharing pods (a share of one GPU, whole GPUs, CPU only, with or without
a GPU model constraint) are offered one at a time to the openb cluster,
and each policy's unallocated GPU % is read against the arrived workload.

- :mod:`~whale_opt.pack.trace`: the openb node and pod lists, every pod kept.
- :mod:`~whale_opt.pack.state`: the packing state (numpy), pods, placements.
- :mod:`~whale_opt.pack.policies`: the Protocol and Random, DotProd,
  Clustering, Packing, BestFit.
- :mod:`~whale_opt.pack.fgd`: the target workload, expected fragmentation, FGD.
- :mod:`~whale_opt.pack.frag_aware`: ``frag-aware``, the engine's preference
  for shares (least loss of capacity for future pods, then tightest fit).
- :mod:`~whale_opt.pack.batch`: batches of arriving pods placed at once, and
  the ``cpsat-bN`` policies; :mod:`~whale_opt.pack.batch_model`: their CP-SAT model.
- :mod:`~whale_opt.pack.experiment`: one run (shuffle, resize, offer, record)
  and the study over seeds.
- :mod:`~whale_opt.pack.published`: the paper's numbers.
- :mod:`~whale_opt.pack.report`: CSV curves, the markdown table, the plots.

``whale-opt pack`` runs it; ``bench/PACKING.md`` has the results.
"""

from whale_opt.pack.batch import BatchPackPolicy as BatchPackPolicy
from whale_opt.pack.batch import CpsatBatchPolicy as CpsatBatchPolicy
from whale_opt.pack.batch_model import BatchModel as BatchModel
from whale_opt.pack.experiment import GRID as GRID
from whale_opt.pack.experiment import POLICIES as POLICIES
from whale_opt.pack.experiment import RunResult as RunResult
from whale_opt.pack.experiment import StudyResult as StudyResult
from whale_opt.pack.experiment import arrange as arrange
from whale_opt.pack.experiment import run_once as run_once
from whale_opt.pack.experiment import study as study
from whale_opt.pack.fgd import FgdPolicy as FgdPolicy
from whale_opt.pack.fgd import TargetWorkload as TargetWorkload
from whale_opt.pack.frag_aware import FragAwarePolicy as FragAwarePolicy
from whale_opt.pack.policies import BestFitPolicy as BestFitPolicy
from whale_opt.pack.policies import ClusteringPolicy as ClusteringPolicy
from whale_opt.pack.policies import DotProdPolicy as DotProdPolicy
from whale_opt.pack.policies import PackingPolicy as PackingPolicy
from whale_opt.pack.policies import PackPolicy as PackPolicy
from whale_opt.pack.policies import RandomPolicy as RandomPolicy
from whale_opt.pack.published import PUBLISHED as PUBLISHED
from whale_opt.pack.state import PackState as PackState
from whale_opt.pack.state import Placement as Placement
from whale_opt.pack.state import Pod as Pod
from whale_opt.pack.state import pods_of as pods_of
from whale_opt.pack.trace import PackCluster as PackCluster
from whale_opt.pack.trace import PodList as PodList
from whale_opt.pack.trace import read_cluster as read_cluster
from whale_opt.pack.trace import read_pods as read_pods
