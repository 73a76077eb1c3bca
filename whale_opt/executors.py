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

:class:`LocalExecutor` is a local pool that survives its workers: a worker
process that dies fails only the task it ran (:class:`WorkerLost`) and is
replaced, where a :class:`concurrent.futures.ProcessPoolExecutor` fails every
pending task and stays broken. Its workers live as long as it does, so a
replay that splits every round pays for them once.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import socket
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, InvalidStateError
from multiprocessing.connection import Connection, wait
from typing import Any

EXECUTORS = ("local", "ray")

log = logging.getLogger("whale_opt")


class WorkerLost(RuntimeError):
    """The worker process running a task died before it answered."""


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


def _serve(conn: Connection) -> None:
    """A worker's loop: run each ``(fn, args, kwargs)`` received, send back
    ``(True, result)`` or ``(False, exception)``; stop on None or a closed pipe."""
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        fn, args, kwargs = task
        try:
            answer: tuple[bool, Any] = (True, fn(*args, **kwargs))
        except BaseException as exc:  # the caller's future carries it
            answer = (False, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # an answer that does not pickle
            conn.send((False, RuntimeError(f"the task's answer could not be sent back: {exc}")))


class _Worker:
    """One worker process, its end of the pipe, and the task it runs (if any)."""

    def __init__(self, context: Any) -> None:
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs,), daemon=True)
        self.process.start()
        theirs.close()
        self.future: Future[Any] | None = None


class LocalExecutor(Executor):
    """Local worker processes; one that dies fails only its own task.

    Parameters
    ----------
    workers
        How many processes run tasks at once.

    A task whose worker dies (killed, out of memory, ``os._exit``) ends with
    :class:`WorkerLost`; a new worker takes the dead one's place, and the
    other tasks go on. Workers start when the first tasks need them. Tasks
    and their answers must pickle.
    """

    def __init__(self, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1 (got {workers})")
        self.workers = workers
        self._max_workers = workers  # what solve() reads off standard executors
        self._context = multiprocessing.get_context()
        self._lock = threading.Lock()
        self._tasks: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]]
        self._tasks = deque()
        self._closed = False
        self._wake_out, self._wake_in = multiprocessing.Pipe(duplex=False)
        self._pool: list[_Worker | None] = [None] * workers  # started on first use
        self._thread = threading.Thread(target=self._dispatch, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)`` for the next free worker."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to an executor that was shut down")
            self._tasks.append((future, fn, args, kwargs))
        self._wake_in.send(None)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking tasks. With ``wait``, finish the queued ones first and stop
        the workers; without, cancel the queued ones and terminate the workers
        (tasks still running end with :class:`WorkerLost`)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if cancel_futures or not wait:
                while self._tasks:
                    self._tasks.popleft()[0].cancel()
        self._wake_in.send(None)
        if not wait:
            for worker in self._pool:
                if worker is not None:
                    worker.process.terminate()
            return
        self._thread.join()
        for worker in self._pool:
            if worker is None:
                continue
            worker.conn.send(None)
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.terminate()
            worker.conn.close()

    def _dispatch(self) -> None:
        """The executor's thread: hand out tasks, collect answers, replace the dead."""
        while True:
            self._hand_out()
            busy = [w for w in self._pool if w is not None and w.future is not None]
            with self._lock:
                if self._closed and not busy and not self._tasks:
                    return
            ready = wait(
                [self._wake_out, *(w.conn for w in busy), *(w.process.sentinel for w in busy)]
            )
            while self._wake_out.poll():
                self._wake_out.recv()
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    self._collect(worker)

    def _hand_out(self) -> None:
        for position, worker in enumerate(self._pool):
            if worker is not None and worker.future is not None:
                continue
            with self._lock:
                if not self._tasks:
                    return
                future, fn, args, kwargs = self._tasks.popleft()
            if worker is None or not worker.process.is_alive():  # not started, or died idle
                if worker is not None:
                    worker.conn.close()
                worker = self._pool[position] = _Worker(self._context)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                worker.conn.send((fn, args, kwargs))
            except Exception as exc:  # the task does not pickle
                future.set_exception(exc)
                continue
            worker.future = future

    def _collect(self, worker: _Worker) -> None:
        """The answer of ``worker``'s task, or WorkerLost and a new worker."""
        future = worker.future
        assert future is not None
        try:
            ok, value = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join()
            code = worker.process.exitcode
            log.warning("a local worker died (exit code %s) while running a task", code)
            future.set_exception(WorkerLost(f"the worker process died (exit code {code})"))
            worker.future = None
            with self._lock:
                closed = self._closed
            if not closed:  # the next task starts a new worker in its place
                worker.conn.close()
                self._pool[self._pool.index(worker)] = None
            return
        worker.future = None
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class InlineExecutor(Executor):
    """Runs each task at once, in the caller's thread (no process, no pickling).

    ``workers`` is only what it reports as how many tasks run at once: a split
    round shares its time limit between pools by that number
    (:func:`whale_opt.decompose.solve_split`), so with the default a round decides
    as it would with :data:`whale_opt.solve.LOCAL_WORKERS` local processes. For
    policies whose pools take no time limit (the heuristics), replays use it to
    skip the processes' cost; a pool that takes its limit would run over the
    round's here, one pool after another.
    """

    def __init__(self, workers: int = 2) -> None:
        self.workers = workers
        self._max_workers = workers  # what solve() reads off standard executors

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` now; a done future of its result or exception."""
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


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
        """Run ``fn(*args, **kwargs)`` as a Ray task; a standard future of its result.

        Cancelling the future (a pool given up at the round's deadline) cancels the
        task too, killing its worker process, so it stops taking a CPU."""
        ref = self._task.remote(fn, args, kwargs)
        return _RayTaskFuture(self._ray, ref)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the Ray instance this executor started (a joined cluster keeps running)."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False


class _RayTaskFuture(Future[Any]):
    """The future of one Ray task: its result or error when the task ends; cancelled,
    the task is cancelled as well (``ray.cancel(force=True)``)."""

    def __init__(self, ray: Any, ref: Any) -> None:
        super().__init__()
        self._ray = ray
        self._ref = ref
        ref.future().add_done_callback(self._relay)

    def _relay(self, inner: Future[Any]) -> None:
        if self.done():
            return  # cancelled before the task ended
        error = inner.exception()
        with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
            if error is None:
                self.set_result(inner.result())
            else:
                self.set_exception(error)

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        with contextlib.suppress(Exception):  # the task may have just ended
            self._ray.cancel(self._ref, force=True)
        return True


def make_executor(kind: str, address: str | None = None) -> Executor | None:
    """The executor named ``kind`` (one of :data:`EXECUTORS`); None for ``local``,
    whose processes :func:`whale_opt.solve.solve` makes per round."""
    if kind == "local":
        return None
    if kind == "ray":
        return RayExecutor(address or "auto")
    raise ValueError(f"unknown executor {kind!r}; choose {', '.join(EXECUTORS)}")
