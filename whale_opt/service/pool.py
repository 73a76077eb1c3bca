"""Solves off the event loop, in a bounded pool that says 503 rather than hang.

At most ``workers`` solves run at once and ``queue`` more wait; a request
beyond that is refused at once with 503 and ``Retry-After``. A request whose
solve has not finished after ``timeout_s`` (waiting included) gets a 503 as
well; its slot stays taken until the solve really ends, so the count of work
in flight is never understated. A worker process that dies (out of memory,
killed) breaks a process pool: it is replaced and the request gets a 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from whale_opt.service import work
from whale_opt.service.errors import saturated

log = logging.getLogger("whale_opt")
T = TypeVar("T")


class SolvePool:
    """A bounded executor for solves.

    Parameters
    ----------
    workers
        Solves that run at once.
    queue
        Solves that may wait for a worker.
    kind
        ``process`` (spawned worker processes: true parallelism) or ``thread``.
    on_reject
        Called for every request refused (a metrics counter).
    """

    def __init__(
        self,
        workers: int,
        queue: int,
        kind: str = "process",
        on_reject: Callable[[], None] | None = None,
    ) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.kind = kind
        self.in_flight = 0
        self.on_reject = on_reject or (lambda: None)
        self._executor = self._new_executor()

    def _new_executor(self) -> Executor:
        if self.kind == "thread":
            return ThreadPoolExecutor(self.workers, thread_name_prefix="whale-opt-solve")
        # spawn, not fork: the server process has threads (event loop, database).
        context = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(self.workers, mp_context=context)

    def warm_up(self) -> None:
        """Start the workers now (imports take a second), not on the first request."""
        for future in [self._executor.submit(work.ping) for _ in range(self.workers)]:
            future.result()

    def _release(self, _: Future[Any]) -> None:
        self.in_flight -= 1

    def _released_from(self, loop: asyncio.AbstractEventLoop) -> Callable[[Future[Any]], None]:
        """A done-callback (run on a worker's thread) that releases the slot on ``loop``."""

        def release(future: Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to count
                loop.call_soon_threadsafe(self._release, future)

        return release

    async def run(self, timeout_s: float, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker; 503 when saturated, timed out or broken."""
        if self.in_flight >= self.capacity:
            self.on_reject()
            raise saturated()
        try:
            future = self._executor.submit(fn, *args)
        except (BrokenProcessPool, RuntimeError) as exc:
            self._replace(exc)
            raise saturated(why="the solver pool restarted") from exc
        self.in_flight += 1
        # The slot is released on the loop's thread when the work really ends.
        future.add_done_callback(self._released_from(asyncio.get_running_loop()))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError:
            future.cancel()  # works if it never started; else it runs to its own limit
            self.on_reject()
            raise saturated(why=f"no answer within {timeout_s:g} s") from None
        except BrokenProcessPool as exc:
            self._replace(exc)
            raise saturated(why="a solver worker died") from exc

    def _replace(self, exc: BaseException) -> None:
        log.error("solver pool broken (%s): starting a new one", exc)
        old = self._executor
        self._executor = self._new_executor()
        old.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the workers; queued work is cancelled."""
        self._executor.shutdown(wait=False, cancel_futures=True)
