"""No starvation: aging under a saturating stream, and the wait ceiling over a week.

**Aging**: a long low-priority job under an endless stream of short,
higher-priority jobs that keeps the cluster saturated.

The setup, one node of 4 GPUs (speed 1.0), every round's decision checked:

- the long job L: class ``training``, weight w_L = 1, 4 GPUs, p_L = 1200 s,
  submitted at 0;
- the stream: class ``training``, weight w_H = 2, 1 GPU, p_H = 600 s, four
  jobs every 600 s from 0 on. Each batch arrives the second the previous one
  ends, so the node never idles and no stream job waits while L is ranked
  behind: a stream job's aging factor is 1 when it starts.

WSPT ranks by effective weight / (GPUs x duration), effective weight =
weight x class factor x (1 + a x hours waited). A fresh stream job's ratio is
w_H / (1 x p_H) = 2 / 600 = 1/300; L's, at time t, is w_L (1 + a t / 3600) / (4 x p_L).
L is ranked first from the first round at which

    (1 + a t / 3600) / 4800 >= 1 / 300,  i.e.  t >= t* = 3600 (16 - 1) / a

(at equality L wins the tie: it was submitted first). The GPUs then free
within one stream-job duration: the batch running at t* started before it
(when L was ranked behind) and ends before t* + p_H, and at that round L is
ranked first among the GPUs' claimants, so

    t* <= start(L) < t* + p_H.

With a = 4 per hour: t* = 13,500 s, so L starts before 14,100 s. Without
aging L's ratio stays 1/4800 < 1/300 and L never starts: the test runs the
same trace to twice that bound and checks that it is still waiting.

What the bound leaves out, on purpose. (1) Both classes are ``training``:
the greedy ranks priority classes strictly before Smith's ratio, so aging
lifts a job within its class only, and a best-effort job under a saturating
training stream waits however long it has aged. (2) Stream jobs that wait
age too, and their ratio grows w_H g_L p_L / (w_L g_H p_H) = 16 times faster
than L's: with the same stream staggered (one job every 150 s, exactly the
node's capacity) each time L is ranked first its reservation idles GPUs
while they drain, the stream's backlog grows, aged stream jobs overtake L
again, and L starves even with aging. Batches make the stream saturate
without ever waiting behind L, which is the case the bound is about.

**The wait ceiling**: one node of 4 GPUs. The stream: a 1-GPU job of
p_S = 1,800 s every 900 s, so exactly two run at any moment and the node is
never empty; three long jobs of the whole node (4 GPUs, p_L = 12 h) arrive
at days 0, 2 and 4. Offered load: 2/4 + 3 x 4 x 12 h / (4 x 168 h) = 71% of
capacity.

Without a ceiling WSPT ranks a long job last (ratio 1 / (4 x 43,200) against
1 / 1,800 for a short one; aging at 0.05/h needs 5,740 h to close that), so it
waits for all four GPUs to be free with no short job queued, which never
happens: it waits the whole week. With the default ceiling (24 h) it is
overdue from its first round past 24 h (rounds run at every arrival, at most
900 s apart), goes first, and reserves the node: nothing starts that would
end after the two running short jobs, so it starts within 24 h + 900 s + p_S.
The short jobs queued behind it wait at most p_L + what the backlog takes to
drain (12 h here, under their own ceiling), so every job starts within
max_wait_s + p_L, the bound the issue asks for.

Why not at 130% of capacity, as the issue asks: under sustained overload the
work queued grows by 0.3 x capacity every second whatever the order, so the
jobs queued grow without bound and so does the oldest one's wait (by
Little's law the mean wait grows with the horizon). Once every job becomes
overdue the order is FIFO: at time T the work done is what arrived before
T / 1.3, so the oldest queued job has waited 0.3 T / 1.3, 39 h after a week
and 78 h after two. The ceiling then caps nothing; a test that passed at
130% for one week would pass only because the week ends. A ceiling bounds
waits when there is capacity to honour it; the test runs below capacity,
where WSPT alone still starves.
"""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob
from whale_opt.sim import SimConfig, SimResult, TraceJob, simulate

AGING_PER_HOUR = 4.0
P_LONG, P_STREAM, STREAM_WEIGHT, BATCH = 1200, 600, 2.0, 4
OVERTAKE_S = 3600 * (STREAM_WEIGHT * 4 * P_LONG / P_STREAM - 1) / AGING_PER_HOUR  # t*
BOUND_S = OVERTAKE_S + P_STREAM
HORIZON_S = int(2 * BOUND_S)


def cluster(aging_per_hour: float) -> Instance:
    return Instance(
        name="one-node",
        gpu_types={"A100": GpuType("A100", 80, 1.0)},
        nodes=(Node("n1", "A100", 4, "nvswitch"),),
        policy=Policy(aging_per_hour=aging_per_hour),
    )


def trace() -> tuple[TraceJob, ...]:
    long_job = TraceJob("long", 0, 4, duration_s=P_LONG)
    stream = tuple(
        TraceJob(f"s{k:04d}-{j}", k * P_STREAM, 1, duration_s=P_STREAM, weight=STREAM_WEIGHT)
        for k in range(HORIZON_S // P_STREAM + 1)
        for j in range(BATCH)
    )
    return (long_job, *stream)


def run(aging_per_hour: float, end_s: int) -> SimResult:
    config = SimConfig(policy="wspt", end_s=end_s, check_decisions=True)
    return simulate(trace(), cluster(aging_per_hour), config)


def test_aging_starts_the_long_job_within_the_derived_bound() -> None:
    result = run(AGING_PER_HOUR, int(BOUND_S) + P_LONG + P_STREAM)
    jobs = result.jobs.set_index("id")
    start = jobs.loc["long", "first_start_s"]
    assert OVERTAKE_S <= start < BOUND_S, (start, OVERTAKE_S, BOUND_S)
    assert jobs.loc["long", "status"] == "completed"
    # The stream kept the node saturated until then: no GPU idle before L's start.
    assert (result.rounds["busy_gpus"] == 4).all()
    assert result.summary["lost_jobs"] == 0


def test_without_aging_the_same_stream_starves_the_long_job() -> None:
    result = run(0.0, HORIZON_S)
    jobs = result.jobs.set_index("id")
    assert jobs.loc["long", "status"] == "queued"
    assert jobs.loc["long", "waited_s"] == HORIZON_S
    assert result.summary["max_queue_delay_s"] == HORIZON_S
    assert result.summary["lost_jobs"] == 0
    # Meanwhile every stream job that arrived ran at once.
    stream = jobs.drop(index="long")
    started = stream[stream["first_start_s"].notna()]
    assert (started["queue_delay_s"] == 0).all()


def test_the_bound_is_the_crossing_of_smith_ratios() -> None:
    """t* is where L's aged ratio meets a fresh stream job's (checked on the instance)."""
    waited = QueuedJob("long", 4, P_LONG, submitted_at=-int(OVERTAKE_S))
    fresh = QueuedJob("stream", 1, P_STREAM, weight=STREAM_WEIGHT)
    instance = cluster(AGING_PER_HOUR).replace(queue=(waited, fresh))
    assert instance.weights[0] / (4 * P_LONG) == pytest.approx(instance.weights[1] / P_STREAM)


# -- the wait ceiling over a week (module docstring, second part) --------------

WEEK_S = 7 * 86_400
P_SHORT, SHORT_GAP, P_WIDE = 1_800, 900, 12 * 3_600
WIDE_AT = (0, 2 * 86_400, 4 * 86_400)
CEILING_S = 86_400  # the default


def week_trace() -> tuple[TraceJob, ...]:
    short = tuple(
        TraceJob(f"s{k:04d}", k * SHORT_GAP, 1, duration_s=P_SHORT)
        for k in range(WEEK_S // SHORT_GAP)
    )
    wide = tuple(TraceJob(f"wide{d}", at, 4, duration_s=P_WIDE) for d, at in enumerate(WIDE_AT))
    return (*wide, *short)


def week(policy: Policy) -> SimResult:
    node = cluster(0.0).replace(policy=policy)
    config = SimConfig(policy="wspt", end_s=WEEK_S, check_decisions=True)
    return simulate(week_trace(), node, config)


def test_the_default_ceiling_starts_every_job_within_max_wait_plus_the_longest() -> None:
    result = week(Policy())  # the defaults: ceiling 24 h, aging 0.05/h
    jobs = result.jobs.set_index("id")
    assert (jobs["status"] == "completed").sum() >= len(jobs) - 3  # the last short ones run on
    assert jobs["first_start_s"].notna().all()
    delays = jobs["queue_delay_s"]
    assert delays.max() <= CEILING_S + P_WIDE
    for d in range(len(WIDE_AT)):
        assert CEILING_S < delays[f"wide{d}"] <= CEILING_S + SHORT_GAP + P_SHORT
    # The short jobs behind a wide one wait its run and the drain, never past their ceiling.
    assert delays.drop(index=[f"wide{d}" for d in range(len(WIDE_AT))]).max() <= CEILING_S


def test_without_a_ceiling_wspt_starves_the_wide_jobs_all_week() -> None:
    result = week(Policy(max_wait_s=None))
    jobs = result.jobs.set_index("id")
    for d, at in enumerate(WIDE_AT):
        assert jobs.loc[f"wide{d}", "status"] == "queued"
        assert jobs.loc[f"wide{d}", "waited_s"] == WEEK_S - at
    assert result.summary["max_queue_delay_s"] == WEEK_S > CEILING_S + P_WIDE
