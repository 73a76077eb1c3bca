"""The openb node and pod lists as the packing study reads them.

Unlike :mod:`whale_opt.convert.openb` (which turns pods into jobs of whole
GPUs for the simulator, and drops CPU-only pods), the study keeps every pod
as it is: its GPU share (``gpu_milli`` < 1000 on one GPU), its multi-GPU ask,
its CPU-only ask (``num_gpu`` 0: CPU and memory only) and its GPU model
constraint (``gpu_spec``, a ``|``-separated set of node models). Rows are
read with the converters' CSV reader, so a bad cell is an
:class:`~whale_opt.io.InputError` naming the file, the line and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from whale_opt.convert._common import Row, csv_rows
from whale_opt.io import InputError

MILLI = 1000  # one whole GPU
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # gpu_spec optional
NODE_FILE = "openb_node_list_gpu_node.csv"
TRACE_FOLDER = "alibaba-gpu-v2023"

IntArray = npt.NDArray[np.int64]


def pod_file(name: str) -> str:
    """The file name of trace ``name`` (``default`` -> ``openb_pod_list_default.csv``)."""
    return f"openb_pod_list_{name}.csv"


def _frozen(values: list[int]) -> IntArray:
    array = np.asarray(values, dtype=np.int64)
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class PackCluster:
    """The nodes of an openb node list: CPU (milli), memory (MiB), GPUs and model.

    ``models`` are the distinct GPU model names (``""`` for CPU-only nodes);
    ``model`` gives each node's index into them. Arrays are read-only.
    """

    names: tuple[str, ...]
    cpu_milli: IntArray
    memory_mib: IntArray
    gpus: IntArray
    model: IntArray
    models: tuple[str, ...]

    @property
    def gpu_capacity_milli(self) -> int:
        """All GPU milli of the cluster (GPUs x 1000)."""
        return int(self.gpus.sum()) * MILLI

    @property
    def max_gpus(self) -> int:
        """The most GPUs on one node."""
        return int(self.gpus.max()) if len(self.gpus) else 0


@dataclass(frozen=True)
class PodList:
    """The pods of an openb pod list, in file order. Arrays are read-only.

    ``milli`` is per GPU (1000 on every multi-GPU pod, 0 on CPU-only pods);
    ``spec`` is the raw ``gpu_spec`` text (empty: any model).
    """

    source: str
    names: tuple[str, ...]
    cpu_milli: IntArray
    memory_mib: IntArray
    num_gpu: IntArray
    milli: IntArray
    spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_request_milli(self) -> IntArray:
        """Each pod's whole GPU request, num_gpu x milli."""
        return self.num_gpu * self.milli


def read_cluster(path: str | Path) -> PackCluster:
    """The nodes of an openb node list CSV (``sn, cpu_milli, memory_mib, gpu, model``)."""
    names: list[str] = []
    cpu: list[int] = []
    memory: list[int] = []
    gpus: list[int] = []
    model_names: list[str] = []
    for row in csv_rows(path, NODE_COLUMNS):
        count = row.integer("gpu")
        model = row.text("model")
        if count > 0 and not model:
            raise row.error("model", "is empty on a node with GPUs")
        names.append(row.text("sn"))
        cpu.append(row.integer("cpu_milli"))
        memory.append(row.integer("memory_mib"))
        gpus.append(count)
        model_names.append(model if count > 0 else "")
    if not names:
        raise InputError(str(path), "(file)", "has no nodes")
    models = tuple(sorted(set(model_names)))
    index = {name: i for i, name in enumerate(models)}
    return PackCluster(
        names=tuple(names),
        cpu_milli=_frozen(cpu),
        memory_mib=_frozen(memory),
        gpus=_frozen(gpus),
        model=_frozen([index[m] for m in model_names]),
        models=models,
    )


def _gpu_ask(row: Row) -> tuple[int, int]:
    """(num_gpu, milli per GPU) of a pod row, checked as the reference scheduler needs."""
    count = row.integer("num_gpu")
    if count == 0:
        return 0, 0  # a CPU-only pod: any gpu_milli is ignored, as in the reference
    milli = row.integer("gpu_milli")
    if not 1 <= milli <= MILLI:
        raise row.error("gpu_milli", f"must be 1..{MILLI} on a pod with GPUs")
    if count > 1 and milli != MILLI:
        raise row.error("gpu_milli", "must be 1000 on a multi-GPU pod (shares are one GPU)")
    return count, milli


def read_pods(path: str | Path) -> PodList:
    """The pods of an openb pod list CSV, every one kept (see the module docstring)."""
    names: list[str] = []
    cpu: list[int] = []
    memory: list[int] = []
    counts: list[int] = []
    millis: list[int] = []
    specs: list[str] = []
    for row in csv_rows(path, POD_COLUMNS):
        count, milli = _gpu_ask(row)
        names.append(row.text("name"))
        cpu.append(row.integer("cpu_milli"))
        memory.append(row.integer("memory_mib"))
        counts.append(count)
        millis.append(milli)
        spec = "|".join(m for m in row.text("gpu_spec").split("|") if m.strip())
        specs.append(spec if count > 0 else "")
    if not names:
        raise InputError(str(path), "(file)", "has no pods")
    return PodList(
        source=str(path),
        names=tuple(names),
        cpu_milli=_frozen(cpu),
        memory_mib=_frozen(memory),
        num_gpu=_frozen(counts),
        milli=_frozen(millis),
        spec=tuple(specs),
    )


def spec_allows(spec: str, models: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """Which of ``models`` a ``gpu_spec`` accepts (all of them when it is empty).

    A CPU-only node (model ``""``) serves no pod that names a model.
    """
    wanted = {m.strip() for m in spec.split("|") if m.strip()}
    if not wanted:
        return np.ones(len(models), dtype=bool)
    return np.array([m in wanted for m in models], dtype=bool)
