"""Where the pools of a split round are solved: local processes, or a Ray cluster.

:func:`whale_opt.solve.solve` takes any :class:`concurrent.futures.Executor`
for the pools of a split round (:mod:`whale_opt.decompose`); with none it
makes local worker processes for the round, which needs no setup.
:class:`RayExecutor` sends the pools to a Ray cluster instead: the Whale
design's leader/worker split, with the round's process as the leader. Ray is
an optional extra (``pip install 'whale-opt[ray]'``) imported only here, and
only when a Ray executor is made.

The same executor fans out anything else that pickles: a benchmark sweep or
a batch of what-if rounds is ``executor.map(fn, items)``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

EXECUTORS = ("local", "ray")


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


def _reachable(address: str | None, timeout_s: float = 3.0) -> None:
    """Raise ConnectionError at once when ``host:port`` (a GCS or ``ray://``
    address) does not answer; Ray itself retries for minutes."""
    if address in (None, "auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"{address!r} is not host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"{address}: {exc.strerror or exc}") from exc


class RayExecutor(Executor):
    """An executor whose tasks run as Ray tasks, one CPU each.

    Parameters
    ----------
    address
        The Ray cluster to join: ``"auto"`` (the one this machine belongs
        to), ``"ray://host:10001"``, a GCS address ``host:6379``, or None
        for a Ray instance of this process's own (started here, stopped by
        :meth:`shutdown`).
    workers
        How many tasks run at once (it sets each pool's share of the time
        limit); default: the cluster's CPUs.
    """

    def __init__(self, address: str | None = "auto", workers: int | None = None) -> None:
        import ray  # the optional extra: only a Ray executor needs it

        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            _reachable(address)
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, workers if workers is not None else cpus)
        self._max_workers = self.workers  # what solve() reads off standard executors
        self._task = ray.remote(num_cpus=1, max_retries=0)(_call)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` as a Ray task; a standard future of its result."""
        ref = self._task.remote(fn, args, kwargs)
        future: Future[Any] = ref.future()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the Ray instance this executor started (a joined cluster keeps running)."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False


def make_executor(kind: str, address: str | None = None) -> Executor | None:
    """The executor named ``kind`` (one of :data:`EXECUTORS`); None for ``local``,
    whose processes :func:`whale_opt.solve.solve` makes per round."""
    if kind == "local":
        return None
    if kind == "ray":
        return RayExecutor(address or "auto")
    raise ValueError(f"unknown executor {kind!r}; choose {', '.join(EXECUTORS)}")
