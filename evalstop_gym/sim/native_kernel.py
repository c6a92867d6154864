"""The compiled event loop: `Cluster.run` over arrays, for priority schedulers and stop rules.

What is this module's own, and what it mirrors: the event loop mirrors `Cluster` (`cluster.py`:
`_next`, `_handle`, `_check`, `_apply`, `_end`, `_slice`; a phase's cost, its length and a job's
work are `transitions.py`'s functions, which both engines call) and the
scheduling pass mirrors `PriorityScheduler.schedule` (policies/base.py: rank by (key, arrival,
id), fill greedily) and, for preemptive schedulers, `PriorityIndex.allocate`
(policies/priority_index.py: the same allocation, refreshing only the running jobs it must).
Each line names what it mirrors, in the same order and with the same floating-point operations,
so a run gives the very numbers the reference gives. Nothing of a policy is written here: the
priority keys and stop rules are `rules.py`'s functions, compiled (`_rank_of` and `_decide` only
slice a job's history out of the arrays). `native.py` packs the jobs and unpacks the results;
`tests/test_native.py` compares the two engines run for run.

The loop is resumable: `advance` runs it from a `LoopState` (what `Cluster` keeps between two
`next_decision` calls) and, under `rules.RULE_AGENT`, returns at each check of a monitored job
type for an agent's answer, re-entering at the code after `_decide`. `run` calls it once to the
end (the built-in policies); `env/compiled_batch.py` calls it per decision for N clusters.

Written for numba (`jit.py` says where its cache lives); without it the same functions run as
plain Python (slowly), which keeps them debuggable with pdb. The scheduling pass stays inline in
`advance`: as a function of its own, the two dozen arrays it needs cost more to pass at every pass
than the pass itself (measured: a noticeably slower E2 run); small helpers are inlined for the
same reason.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import rules, transitions
from .cluster import ARRIVAL, COMPLETION, PHASE_END
from .jit import jitable, njit  # numba's, caching in the user's cache folder (never the package)
from .jobs import STATES, JobState, Phase
from .pace import progress_between
from .rules import RULE_AGENT, RULE_NONE  # the spec's words

# Job states as their index in jobs.STATES, phases as jobs.Phase's values
PENDING, RUNNING, PREEMPTED, COMPLETED, STOPPED = (STATES.index(s) for s in (
    JobState.PENDING, JobState.RUNNING, JobState.PREEMPTED, JobState.COMPLETED, JobState.STOPPED))
IDLE, RESTART, TRAIN, EVAL = (int(p) for p in (Phase.IDLE, Phase.RESTART, Phase.TRAIN, Phase.EVAL))
OK, ERR_LEFT_WAITING, ERR_PAST, ERR_GPUS = 0, 1, 2, 3
DECISION, ROOM = 4, 5    # `advance` paused: a check for the agent; a heap to grow


class LoopState(NamedTuple):
    """One cluster's event loop between calls of `advance`: what `Cluster` keeps between two
    `next_decision` calls. Heaps are arrays of rows (heapq's order: rows compare as tuples),
    their sizes in `ist`; the last row of each is scratch."""

    phase: np.ndarray        # per job: IDLE, RESTART, TRAIN, EVAL
    cls_gpus: np.ndarray     # Cluster.waiting: a heap per GPU demand, demands ascending
    cls: np.ndarray          # each job's demand class
    cls_off: np.ndarray      # where each class's heap starts in `wait`
    cls_size: np.ndarray
    wait: np.ndarray
    major: np.ndarray        # each job's key as last computed: frozen while it waits,
    key: np.ndarray          # refreshed while it runs
    run_seq: np.ndarray      # Cluster._run_seq; -1: not running
    run_list: np.ndarray     # Cluster.running, in start order
    run_pos: np.ndarray
    run_version: np.ndarray  # preemptive: the latest entry of each running job in `rheap`
    arrivals: np.ndarray     # job ids by arrival (stable)
    heap: np.ndarray         # phase ends: rows (time, seq, job, epoch)
    rheap: np.ndarray        # preemptive: running jobs by stored key, largest first (negated):
                             # rows (-major, -key, -arrival, -id, version)
    ist: np.ndarray          # the loop's scalars: S_* slots
    fst: np.ndarray          # F_* slots
    continued: np.ndarray    # RULE_AGENT: jobs whose checks were answered "continue" since
                             # the caller last reset ist[S_N_CONT] (the env's reward reads them)


class Platform(NamedTuple):
    """The run's constants: the cluster and the policy's compiled form (`rules.NativeSpec`)."""

    total_gpus: int
    overhead: float
    key_kind: int
    preemptive: bool
    rule: int
    k_by_type: np.ndarray
    best_variant: bool
    p_stop: float
    threshold: float
    window: int
    slice_share: float
    time_sliced: bool        # a job its key demotes (major < 0) runs at `slice_share`
    rekeys_at_checks: bool   # a running job's key may rise at a check: stored afresh there
    rekeys_at_passes: bool   # running jobs' keys rise as they run: all stored afresh at a pass


class Jobs(NamedTuple):
    """The jobs as `native._pack` lays them out (each job's checks and evals end to end)."""

    arrival: np.ndarray
    gpus: np.ndarray
    duration: np.ndarray
    dur_est: np.ndarray
    eval_min: np.ndarray
    peak: np.ndarray
    speed: np.ndarray
    jtype: np.ndarray
    paced: np.ndarray
    chk_ptr: np.ndarray
    chk_prog: np.ndarray
    chk_work: np.ndarray
    chk_idx: np.ndarray
    chk_loss: np.ndarray
    ev_ptr: np.ndarray
    ev_score: np.ndarray
    ev_prog: np.ndarray


class Outcome(NamedTuple):
    """What a run leaves in each job's record (`native._unpack` writes it back)."""

    state: np.ndarray
    work: np.ndarray
    next_check: np.ndarray
    epoch: np.ndarray
    has_run: np.ndarray
    first_start: np.ndarray
    end_time: np.ndarray
    gpu_min: np.ndarray
    gpu_after: np.ndarray
    n_pre: np.ndarray
    phase_start: np.ndarray
    chk_time: np.ndarray
    stop_value: np.ndarray


class Scratch(NamedTuple):
    """The arrays one scheduling pass works in."""

    after: np.ndarray        # the ranked tail of a pass, ascending
    top: np.ndarray          # the same, as found (descending)
    pending: np.ndarray      # re-keyed, not yet reached (ascending)
    prefix: np.ndarray       # waiting jobs taken off the heaps (ascending)
    sizes: np.ndarray        # cumulative GPUs of `prefix` (n + 1)
    keep: np.ndarray
    to_start: np.ndarray
    to_preempt: np.ndarray



# a job's transitions, compiled: the very functions `Cluster` calls
_work_after = njit(cache=True, inline="always")(jitable(transitions.work_after))
_phase_charge = njit(cache=True, inline="always")(transitions.phase_charge)
_phase_minutes = njit(cache=True, inline="always")(transitions.phase_minutes)


_progress_between = njit(cache=True, inline="always")(progress_between)   # the one formula


@njit(cache=True)
def _reported(j, w, paced, chk_ptr, next_check, chk_prog, chk_work):
    """Job.reported_progress: the progress the trainer reports once work `w` is done."""
    if not paced[j]:
        return w
    first, c = chk_ptr[j], chk_ptr[j] + next_check[j]
    if c >= chk_ptr[j + 1]:
        return chk_prog[chk_ptr[j + 1] - 1]
    prev_p, prev_w = 0.0, 0.0
    if c > first:
        prev_p, prev_w = chk_prog[c - 1], chk_work[c - 1]
    return _progress_between(w, prev_p, prev_w, chk_prog[c], chk_work[c])


# the policies' arithmetic, compiled: the very functions the policies call
_priority_key = rules.compiled(rules.priority_key)
_stop_value = rules.compiled(rules.stop_value)
decline_evidence = rules.compiled(rules.decline_evidence)   # DeclineTest's, from plain Python
decline_critical = rules.compiled(rules.decline_critical)


@njit(cache=True, inline="always")
def _passed(j, chk_ptr, chk_idx, next_check):
    """(end of the checks passed, evals passed) of job j: its loss history is
    chk_loss[chk_ptr[j]:end], its eval history ev_*[ev_ptr[j]:ev_ptr[j] + evals] (eval checks
    carry their eval's index, in order; milestones and completion a negative code)."""
    first, last = chk_ptr[j], chk_ptr[j] + next_check[j]
    c = last - 1
    while c >= first and chk_idx[c] < 0:
        c -= 1
    return last, (chk_idx[c] + 1 if c >= first else 0)


@njit(cache=True)
def _rank_of(key_kind, j, progress, service, arrival, dur_est, chk_ptr, chk_idx, chk_loss,
             next_check, ev_ptr, ev_score):
    """The scheduler's key of job j at `progress` and `service` (GPU-minutes held):
    `rules.priority_key` on its history."""
    last, n_evals = _passed(j, chk_ptr, chk_idx, next_check)
    return _priority_key(key_kind, arrival[j], dur_est[j], progress, chk_loss[chk_ptr[j]:last],
                         ev_score[ev_ptr[j]:ev_ptr[j] + n_evals], service)


@njit(cache=True, inline="always")
def _attained_service(j, now, phase, phase_start, gpu_min, gpus):
    """The GPU-minutes job j has held by `now`: GPUs times the view's `attained_minutes`."""
    attained = gpu_min[j] / gpus[j]
    if phase[j] != IDLE:
        attained += now - phase_start[j]
    return gpus[j] * attained


@njit(cache=True)
def _running_key(key_kind, j, now, phase, work, phase_start, speed, duration, gpu_min, gpus,
                 arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                 next_check, ev_ptr, ev_score):
    """Running job j's key at `now`, as a view taken now gives it."""
    progress = _reported(j, _work_after(phase[j], work[j], now - phase_start[j], speed[j],
                                        duration[j]), paced, chk_ptr, next_check, chk_prog,
                         chk_work)
    return _rank_of(key_kind, j, progress, _attained_service(j, now, phase, phase_start, gpu_min,
                                                             gpus), arrival, dur_est, chk_ptr,
                    chk_idx, chk_loss, next_check, ev_ptr, ev_score)


@njit(cache=True)
def _before(major_a, key_a, arrival_a, a, major_b, key_b, arrival_b, b):
    """(key, arrival, id) of a ranks before that of b: PriorityScheduler._rank's order."""
    if major_a != major_b:
        return major_a < major_b
    if key_a != key_b:
        return key_a < key_b
    if arrival_a != arrival_b:
        return arrival_a < arrival_b
    return a < b


@njit(cache=True)
def _ranks_before(a, b, major, key, arrival):
    """Job a ranks before job b, on the keys they were last given."""
    return _before(major[a], key[a], arrival[a], a, major[b], key[b], arrival[b], b)


@njit(cache=True)
def _wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival):
    """Put waiting job j into its demand class's heap (rank order: the best at the root)."""
    c = cls[j]
    base = cls_off[c]
    i = cls_size[c]
    cls_size[c] += 1
    while i > 0:
        parent = (i - 1) // 2
        m = wait[base + parent]
        if not _ranks_before(j, m, major, key, arrival):
            break
        wait[base + i] = m
        i = parent
    wait[base + i] = j


@njit(cache=True)
def _wait_pop(c, cls_off, cls_size, wait, major, key, arrival):
    """Remove the best-ranked job of demand class c."""
    base = cls_off[c]
    cls_size[c] -= 1
    size = cls_size[c]
    j = wait[base + size]                     # the last leaf sifts down from the root
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        a = wait[base + child]
        if child + 1 < size:
            b = wait[base + child + 1]
            if _ranks_before(b, a, major, key, arrival):
                child += 1
                a = b
        if not _ranks_before(a, j, major, key, arrival):
            break
        wait[base + i] = a
        i = child
    wait[base + i] = j


@njit(cache=True)
def _best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, capacity):
    """The best-ranked waiting job needing at most `capacity` GPUs; -1 if none."""
    best = -1
    for c in range(cls_gpus.shape[0]):
        if cls_gpus[c] > capacity:
            break                              # classes ascend in demand
        if cls_size[c] > 0:
            m = wait[cls_off[c]]
            if best < 0 or _ranks_before(m, best, major, key, arrival):
                best = m
    return best


@njit(cache=True)
def _fill(capacity, after, n_after, gpus, arrival, cls, cls_gpus, cls_off, cls_size, wait, major,
          key, keep, to_start, n_start):
    """`_fill` over the rank order of the ranked running jobs `after` and the waiting lists.

    Waiting jobs that do not fit are skipped by the greedy fill and never fit later (capacity
    only shrinks), so at each step only the heads of the demand classes that still fit compete
    with the next running job. Returns the number of jobs to start (in `to_start`, rank order,
    taken off the waiting heaps, after the first `n_start`); `keep` marks the running jobs that
    keep their GPUs.
    """
    ri = 0
    while True:
        best = _best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, capacity)
        if ri < n_after and (best < 0 or _ranks_before(after[ri], best, major, key, arrival)):
            j = after[ri]
            ri += 1
            keep[j] = gpus[j] <= capacity
            if keep[j]:
                capacity -= gpus[j]
            continue
        if best < 0:
            return n_start
        to_start[n_start] = best
        n_start += 1
        capacity -= gpus[best]
        _wait_pop(cls[best], cls_off, cls_size, wait, major, key, arrival)


@njit(cache=True, inline="always")
def _row_lt(h, a, b):
    """Row a of heap array h sorts before row b: tuple order (first unequal column decides)."""
    for c in range(h.shape[1]):
        if h[a, c] != h[b, c]:
            return h[a, c] < h[b, c]
    return False


@njit(cache=True, inline="always")
def _row_copy(h, dst, src):
    for c in range(h.shape[1]):
        h[dst, c] = h[src, c]


@njit(cache=True, inline="always")
def _sift_down(h, start, pos):
    """heapq._siftdown over the rows of h, for the new item waiting in the scratch row (h's
    last): parents below it move down from `pos`, then it takes its place."""
    tmp = h.shape[0] - 1
    while pos > start:
        parent = (pos - 1) >> 1
        if _row_lt(h, tmp, parent):
            _row_copy(h, pos, parent)
            pos = parent
            continue
        break
    _row_copy(h, pos, tmp)


@njit(cache=True, inline="always")
def heap_pop(h, size):
    """heapq.heappop on the first `size` rows (read the root first); returns the new size."""
    size -= 1
    if size > 0:
        tmp = h.shape[0] - 1
        _row_copy(h, tmp, size)                # the last row, to sift from the root
        pos = 0                                # heapq._siftup
        child = 1
        while child < size:
            right = child + 1
            if right < size and not _row_lt(h, child, right):
                child = right
            _row_copy(h, pos, child)
            pos = child
            child = 2 * pos + 1
        _sift_down(h, 0, pos)
    return size


@njit(cache=True, inline="always")
def _push_event(heap, size, time, seq, j, ep):
    """heapq.heappush of the phase end (time, seq, job, epoch); returns the new size."""
    tmp = heap.shape[0] - 1
    heap[tmp, 0], heap[tmp, 1], heap[tmp, 2], heap[tmp, 3] = time, seq, j, ep
    _sift_down(heap, 0, size)
    return size + 1


@njit(cache=True, inline="always")
def _store_running_key(rheap, size, j, major, key, arrival, run_version):
    """(Re)file running job j in the max-heap under its current key; older entries go stale.
    Returns the heap's new size."""
    run_version[j] += 1
    tmp = rheap.shape[0] - 1
    rheap[tmp, 0], rheap[tmp, 1], rheap[tmp, 2] = -major[j], -key[j], -arrival[j]
    rheap[tmp, 3], rheap[tmp, 4] = -j, run_version[j]
    _sift_down(rheap, 0, size)
    return size + 1


@njit(cache=True, inline="always")
def _leave_running(j, run_list, run_pos, run_seq, n_run):
    """Take job j out of the running set, which stays in start order (Cluster.running's dict
    order, which the env's reward sums in); returns the new count."""
    for q in range(run_pos[j], n_run - 1):
        m = run_list[q + 1]
        run_list[q] = m
        run_pos[m] = q
    run_pos[j] = -1
    run_seq[j] = -1
    return n_run - 1


@njit(cache=True, inline="always")
def _phase_length(j, chk_work, chk_ptr, next_check, work, duration, speed, phase, overhead,
                  eval_min):
    """How long job j's phase `phase` lasts (training: to its next check point)."""
    return _phase_minutes(phase, overhead, eval_min[j], chk_work[chk_ptr[j] + next_check[j]],
                          work[j], speed[j], duration[j])


@njit(cache=True)
def _charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
            gpu_after):
    """The phase job j is in, charged up to `now` (`peak`: its work at its peak)."""
    elapsed = now - phase_start[j]
    if elapsed <= 0 or phase[j] == IDLE:
        return
    spent, past_peak, end = _phase_charge(phase[j], gpus[j], elapsed, work[j], peak[j],
                                          speed[j], duration[j])
    work[j] = end
    gpu_min[j] += spent
    gpu_after[j] += past_peak
    phase_start[j] = now


@njit(cache=True)
def _decide(j, rule, k_by_type, best_variant, p_stop, threshold, window, jtype, progress,
            chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score, ev_prog):
    """The stop rule on job j's history so far (`rules.stop_value`); `progress` is its reported
    progress. Returns NaN to continue, else the number the rule's reason quotes."""
    k = k_by_type[jtype[j]]
    if rule == RULE_NONE or k == 0:   # DetectorBase.decide: not monitored
        return np.nan
    last, n_evals = _passed(j, chk_ptr, chk_idx, next_check)
    first = ev_ptr[j]
    return _stop_value(rule, k, best_variant, p_stop, threshold, window, progress,
                       ev_score[first:first + n_evals], ev_prog[first:first + n_evals],
                       chk_loss[chk_ptr[j]:last])


# The loop's state between calls of `advance` (a cluster paused at a decision keeps it here):
# int slots of `ist`, float slots of `fst`
(S_N, S_FREE, S_SEQ, S_NEXT_ARRIVAL, S_POPPED, S_NEEDS_PASS, S_N_WAIT, S_N_RUN, S_STARTS,
 S_HEAP, S_RHEAP, S_PENDING, S_N_CONT) = range(13)
N_INT_SLOTS = 13
F_NOW, F_ANSWER = 0, 1                        # the clock; the answer to the pending check
N_FLOAT_SLOTS = 2
NO_CLASS = 2 ** 62                             # demand of an unused (padding) class slot


@njit(cache=True)
def setup(total_gpus, arrival, gpus, cls_gpus, cls, cls_off, cls_size, arrivals, ist, fst):
    """The loop's state before the first event (Cluster.__init__): demand classes, the arrival
    order, an empty cluster. Arrays may be longer than the n jobs (padding)."""
    n = arrival.shape[0]
    uniq = np.unique(gpus)                     # Cluster.waiting: one heap per GPU demand
    cls_gpus[:] = NO_CLASS
    cls_gpus[:uniq.shape[0]] = uniq
    cls[:n] = np.searchsorted(uniq, gpus)
    cls_off[:] = 0
    cls_off[1:uniq.shape[0]] = np.cumsum(np.bincount(cls[:n], minlength=uniq.shape[0]))[:-1]
    cls_size[:] = 0
    # Cluster.__init__ queues every arrival first (sequence numbers 1..n); they are read here
    # in that order from a sorted list instead, beside a heap of phase ends, which keeps the
    # heap as small as the set of running jobs
    arrivals[:n] = np.argsort(arrival, kind="mergesort")
    ist[:] = 0
    ist[S_N], ist[S_FREE], ist[S_SEQ], ist[S_PENDING] = n, total_gpus, n, -1
    fst[:] = 0.0


@njit(cache=True)
def run(total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant, p_stop,
        threshold, window, slice_share, time_sliced, rekeys_at_checks, rekeys_at_passes,
        arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced,
        chk_ptr, chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog,
        state, work, next_check, epoch, has_run, first_start, end_time, gpu_min, gpu_after,
        n_pre, phase_start, chk_time, stop_value):
    """Run every job to its end; fills the state arrays in place. Returns (status, events)."""
    n = arrival.shape[0]
    loop = new_loop(total_gpus, arrival, gpus, 0)
    work_space = scratch(n)
    spec = Platform(total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant,
                    p_stop, threshold, window, slice_share, time_sliced, rekeys_at_checks,
                    rekeys_at_passes)
    jobs = Jobs(arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced, chk_ptr,
                chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog)
    out = Outcome(state, work, next_check, epoch, has_run, first_start, end_time, gpu_min,
                  gpu_after, n_pre, phase_start, chk_time, stop_value)
    while True:
        status = advance(spec, jobs, out, loop, work_space)
        if status != ROOM:
            return status, loop.ist[S_POPPED]
        loop = with_room(loop)


@njit(cache=True)
def new_loop(total_gpus, arrival, gpus, n_checks):
    """A cluster's loop state before its first event, for the jobs `arrival`, `gpus`;
    `n_checks`: room for the jobs' checks in `continued` (0 unless under RULE_AGENT)."""
    n = arrival.shape[0]
    cls_gpus, cls = np.empty(n, np.int64), np.empty(n, np.int64)
    cls_off, cls_size = np.zeros(n, np.int64), np.zeros(n, np.int64)
    arrivals = np.empty(n, np.int64)
    ist, fst = np.zeros(N_INT_SLOTS, np.int64), np.zeros(N_FLOAT_SLOTS)
    setup(total_gpus, arrival, gpus, cls_gpus, cls, cls_off, cls_size, arrivals, ist, fst)
    return LoopState(np.zeros(n, np.int64), cls_gpus, cls, cls_off, cls_size,
                     np.empty(n, np.int64), np.zeros(n, np.int64), np.zeros(n),
                     np.full(n, -1, np.int64), np.empty(n, np.int64), np.full(n, -1, np.int64),
                     np.zeros(n, np.int64), arrivals, np.empty((2 * n + 16, 4)),
                     np.empty((4 * n + 16, 5)), ist, fst, np.empty(n_checks, np.int64))


@njit(cache=True)
def with_room(loop):
    """`loop` with both heaps twice as large (after `advance` returned ROOM)."""
    return LoopState(loop.phase, loop.cls_gpus, loop.cls, loop.cls_off, loop.cls_size,
                     loop.wait, loop.major, loop.key, loop.run_seq, loop.run_list, loop.run_pos,
                     loop.run_version, loop.arrivals, grown(loop.heap), grown(loop.rheap),
                     loop.ist, loop.fst, loop.continued)


@njit(cache=True)
def grown(h):
    """Heap array h with twice the rows (the contents kept; the last row is scratch)."""
    out = np.empty((2 * h.shape[0], h.shape[1]))
    out[:h.shape[0] - 1] = h[:h.shape[0] - 1]
    return out


@njit(cache=True)
def scratch(n):
    """The arrays one scheduling pass works in (shared by clusters run one after the other)."""
    return Scratch(np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                   np.empty(n, np.int64), np.zeros(n + 1, np.int64), np.zeros(n, np.bool_),
                   np.empty(n, np.int64), np.empty(n, np.int64))


@njit(cache=True)
def advance(spec, jobs, out, loop, sc):
    """Run events from where the loop stopped (`loop`) until the end (OK or an ERR_*), a
    check of a monitored job under RULE_AGENT (DECISION: answer in fst[F_ANSWER], NaN to
    continue, and call again), or a heap with too little room (ROOM: grow it, call again)."""
    (total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant, p_stop,
     threshold, window, slice_share, time_sliced, rekeys_at_checks, rekeys_at_passes) = spec
    (arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced, chk_ptr, chk_prog,
     chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog) = jobs
    (state, work, next_check, epoch, has_run, first_start, end_time, gpu_min, gpu_after, n_pre,
     phase_start, chk_time, stop_value) = out
    (phase, cls_gpus, cls, cls_off, cls_size, wait, major, key, run_seq, run_list, run_pos,
     run_version, arrivals, heap, rheap, ist, fst, continued) = loop
    after, top, pending, prefix, sizes, keep, to_start, to_preempt = sc
    n = ist[S_N]
    free, seq, next_arrival, popped = ist[S_FREE], ist[S_SEQ], ist[S_NEXT_ARRIVAL], ist[S_POPPED]
    needs_pass, n_wait, n_run, starts = ist[S_NEEDS_PASS] != 0, ist[S_N_WAIT], ist[S_N_RUN], \
        ist[S_STARTS]
    n_heap, n_rheap, resume, n_cont = ist[S_HEAP], ist[S_RHEAP], ist[S_PENDING], ist[S_N_CONT]
    now = fst[F_NOW]
    agent = rule == RULE_AGENT
    status = OK

    j, value = -1, np.nan
    while True:
        if n_heap + n + 1 >= heap.shape[0] or n_rheap + 2 * n + 2 >= rheap.shape[0]:
            status = ROOM                      # a pass pushes at most n entries into each
            break
        checked = -1
        if resume >= 0:                        # the agent answered the check of job `resume`
            j, checked, resume = resume, resume, -1
            value = fst[F_ANSWER]
            new_phase = -1
            finished = -1
        else:
            # ------------------------------------------------------------ Cluster._next
            from_arrivals = next_arrival < n and (
                n_heap == 0 or arrival[arrivals[next_arrival]] < heap[0, 0])
            if from_arrivals:
                next_time = arrival[arrivals[next_arrival]]
            elif n_heap > 0:
                next_time = heap[0, 0]
            else:
                next_time = np.nan             # no event left
            if needs_pass and next_time != now:
                needs_pass = False
                if n_wait == 0:
                    continue                   # the fill keeps every running job, starts none
                # -------------------------------------------- PriorityScheduler.schedule
                if not preemptive:
                    n_after = 0
                    n_start = _fill(free, after, 0, gpus, arrival, cls, cls_gpus, cls_off,
                                    cls_size, wait, major, key, keep, to_start, 0)
                else:
                    # PriorityIndex.allocate, lazily: running jobs are taken from the bottom of
                    # the ranking up (their stored keys bound their keys from above: keys never
                    # rise while a job runs between two checks), until the waiting jobs ranked
                    # before the lowest one taken fit in the GPUs it and those below it free.
                    # Every running job above it keeps its GPUs whatever the exact order; the
                    # exact fill covers the rest.
                    if rekeys_at_passes:   # keys that rose as their jobs ran, stored afresh
                        n_rheap = 0
                        for q in range(n_run):
                            j = run_list[q]
                            major[j], key[j] = _running_key(
                                key_kind, j, now, phase, work, phase_start, speed, duration,
                                gpu_min, gpus, arrival, dur_est, paced, chk_ptr, chk_prog,
                                chk_work, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                            n_rheap = _store_running_key(rheap, n_rheap, j, major, key,
                                                         arrival, run_version)
                    first = _best_waiting(cls_gpus, cls_off, cls_size, wait, major, key,
                                          arrival, total_gpus)
                    n_top, n_pending, n_prefix = 0, 0, 0
                    room = free
                    while True:
                        nxt = -1
                        while True:            # the next running job down the ranking
                            while n_rheap > 0 and (
                                    run_pos[int(-rheap[0, 3])] < 0
                                    or rheap[0, 4] != run_version[int(-rheap[0, 3])]):
                                n_rheap = heap_pop(rheap, n_rheap)   # stale: ended, preempted
                            bound = -1         # or re-keyed; the largest stored entry ranked
                            if n_rheap > 0 and _before(               # after `first`
                                    major[first], key[first], arrival[first], first,
                                    -rheap[0, 0], -rheap[0, 1], -rheap[0, 2], -rheap[0, 3]):
                                bound = int(-rheap[0, 3])
                            if n_pending > 0:
                                m = pending[n_pending - 1]
                                if bound < 0 or _before(-rheap[0, 0], -rheap[0, 1],
                                                        -rheap[0, 2], bound, major[m], key[m],
                                                        arrival[m], m):
                                    nxt = m
                                    n_pending -= 1
                                    break
                            if bound < 0:
                                break
                            n_rheap = heap_pop(rheap, n_rheap)
                            j = bound
                            major[j], key[j] = _running_key(
                                key_kind, j, now, phase, work, phase_start, speed, duration,
                                gpu_min, gpus, arrival, dur_est, paced, chk_ptr, chk_prog,
                                chk_work, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                            if _ranks_before(first, j, major, key, arrival):
                                r = n_pending      # pending stays ascending
                                while r > 0 and _ranks_before(j, pending[r - 1], major, key,
                                                              arrival):
                                    pending[r] = pending[r - 1]
                                    r -= 1
                                pending[r] = j
                                n_pending += 1
                            else:
                                n_rheap = _store_running_key(rheap, n_rheap, j, major, key,
                                                             arrival, run_version)
                        if nxt < 0:            # the whole tail is ranked: the plain fill
                            for k in range(n_prefix):
                                _wait_push(prefix[k], cls, cls_off, cls_size, wait, major,
                                           key, arrival)
                            taken = 0
                            break
                        top[n_top] = nxt
                        n_top += 1
                        room += gpus[nxt]
                        while sizes[n_prefix] <= room and (n_prefix == 0 or _ranks_before(
                                prefix[n_prefix - 1], nxt, major, key, arrival)):
                            m = _best_waiting(cls_gpus, cls_off, cls_size, wait, major, key,
                                              arrival, total_gpus)
                            if m < 0 or _ranks_before(nxt, m, major, key, arrival):
                                break
                            _wait_pop(cls[m], cls_off, cls_size, wait, major, key, arrival)
                            prefix[n_prefix] = m
                            sizes[n_prefix + 1] = sizes[n_prefix] + gpus[m]
                            n_prefix += 1
                        taken = n_prefix
                        while taken > 0 and _ranks_before(nxt, prefix[taken - 1], major, key,
                                                          arrival):
                            taken -= 1
                        if sizes[taken] <= room:   # everything ranked above nxt fits: settled
                            for k in range(taken, n_prefix):
                                _wait_push(prefix[k], cls, cls_off, cls_size, wait, major,
                                           key, arrival)
                            break
                    for k in range(taken):
                        to_start[k] = prefix[k]
                    n_after = n_top
                    for k in range(n_top):     # the ranked tail, ascending
                        after[k] = top[n_top - 1 - k]
                    n_start = _fill(room - sizes[taken], after, n_after, gpus, arrival, cls,
                                    cls_gpus, cls_off, cls_size, wait, major, key, keep,
                                    to_start, taken)
                    for k in range(n_pending):     # ranked but above the settled point: kept
                        j = pending[k]
                        n_rheap = _store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                n_wait -= n_start
                # -------------------------------------------- Cluster._apply: preempt, start
                n_drop = 0
                for i in range(n_after):       # not kept, in start order
                    j = after[i]
                    if keep[j]:
                        n_rheap = _store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                    else:
                        to_preempt[n_drop] = j
                        n_drop += 1
                if n_drop > 1:
                    order = np.argsort(run_seq[to_preempt[:n_drop]])
                    to_preempt[:n_drop] = to_preempt[:n_drop][order]
                for i in range(n_drop):        # Cluster._preempt
                    j = to_preempt[i]
                    _charge(j, now, phase, work, phase_start, gpus, duration, speed, peak,
                            gpu_min, gpu_after)
                    n_run = _leave_running(j, run_list, run_pos, run_seq, n_run)
                    major[j], key[j] = _rank_of(key_kind, j, _reported(
                        j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work),
                        _attained_service(j, now, phase, phase_start, gpu_min, gpus), arrival,
                        dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                    _wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival)
                    n_wait += 1
                    free += gpus[j]
                    state[j] = PREEMPTED
                    phase[j] = IDLE
                    epoch[j] += 1
                    n_pre[j] += 1
                    needs_pass = True
                for i in range(n_start):       # Cluster._start
                    j = to_start[i]
                    starts += 1
                    run_seq[j] = starts
                    run_list[n_run] = j
                    run_pos[j] = n_run
                    n_run += 1
                    free -= gpus[j]
                    if free < 0:               # Cluster._set_free's guard
                        status = ERR_GPUS
                        break
                    if preemptive:             # its waiting key: its key now, as it starts
                        n_rheap = _store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                    state[j] = RUNNING
                    if np.isnan(first_start[j]):
                        first_start[j] = now
                    resuming = has_run[j] and overhead > 0
                    has_run[j] = True
                    phase[j] = RESTART if resuming else TRAIN    # Cluster._start_phase
                    phase_start[j] = now
                    length = _phase_length(j, chk_work, chk_ptr, next_check, work, duration,
                                           speed, phase[j], overhead, eval_min)
                    seq += 1
                    n_heap = _push_event(heap, n_heap, now + length, seq, j, epoch[j])
                if status != OK:
                    break
                continue
            if np.isnan(next_time):
                status = ERR_LEFT_WAITING if n_wait > 0 else OK
                break
            # ------------------------------------------------------------ Cluster._handle
            if from_arrivals:                  # (a pass would have looped back above)
                t, kind, j, ev_epoch = next_time, ARRIVAL, arrivals[next_arrival], 0
                next_arrival += 1
            else:
                t, j, ev_epoch = heap[0, 0], int(heap[0, 2]), int(heap[0, 3])
                n_heap = heap_pop(heap, n_heap)
                kind = PHASE_END
            if t < now:
                status = ERR_PAST
                break
            now = t
            popped += 1
            if kind == ARRIVAL:
                major[j], key[j] = _rank_of(key_kind, j, _reported(
                    j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work), 0.0, arrival,
                    dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score)  # unserved
                _wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival)
                n_wait += 1
                needs_pass = True
                continue
            if ev_epoch != epoch[j]:
                continue
            _charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                    gpu_after)
            c = chk_ptr[j] + next_check[j]
            new_phase = -1
            finished = -1
            if phase[j] == RESTART:
                new_phase = TRAIN
            elif phase[j] == TRAIN:
                work[j] = chk_work[c]
                if chk_idx[c] >= 0:
                    new_phase = EVAL
                elif chk_idx[c] == COMPLETION:
                    next_check[j] += 1
                    finished = COMPLETED
            if new_phase < 0 and finished < 0:
                # -------------------------------------------- Cluster._check, answer_check
                phase[j] = IDLE
                chk_time[c] = now
                next_check[j] += 1
                if chk_idx[c] >= 0:
                    needs_pass = True
                if agent and k_by_type[jtype[j]] != 0:
                    resume = j                 # the agent answers: pause here
                    status = DECISION
                    break
                value = _decide(j, rule, k_by_type, best_variant, p_stop, threshold, window,
                                jtype, _reported(j, work[j], paced, chk_ptr, next_check,
                                                 chk_prog, chk_work), chk_ptr, chk_idx,
                                chk_loss, next_check, ev_ptr, ev_score, ev_prog)
                checked = j
        if checked >= 0:                       # answer_check
            if not np.isnan(value):
                stop_value[j] = value
                finished = STOPPED
            else:
                if agent:                      # what the env's reward charges to a continue
                    continued[n_cont] = j
                    n_cont += 1
                if next_check[j] >= chk_ptr[j + 1] - chk_ptr[j]:
                    finished = COMPLETED
                else:
                    new_phase = TRAIN
                    if (preemptive and rekeys_at_checks) or time_sliced:
                        # a key read off the history may rise at a check: store it afresh, as
                        # the cluster's change log makes PriorityIndex re-view the job
                        major[j], key[j] = _rank_of(key_kind, j, _reported(
                            j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work),
                            _attained_service(j, now, phase, phase_start, gpu_min, gpus),
                            arrival, dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr,
                            ev_score)
                        if preemptive:
                            n_rheap = _store_running_key(rheap, n_rheap, j, major, key,
                                                         arrival, run_version)
                        if time_sliced:   # Cluster._slice: demoted, sliced
                            speed[j] = 1.0 * slice_share if major[j] < 0 else 1.0
        if finished >= 0:                      # Cluster._end (the job is running)
            _charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                    gpu_after)
            n_run = _leave_running(j, run_list, run_pos, run_seq, n_run)
            free += gpus[j]
            state[j] = finished
            phase[j] = IDLE
            epoch[j] += 1
            end_time[j] = now
            needs_pass = True
        elif new_phase >= 0:                   # Cluster._start_phase
            phase[j] = new_phase
            phase_start[j] = now
            length = _phase_length(j, chk_work, chk_ptr, next_check, work, duration, speed,
                                   new_phase, overhead, eval_min)
            seq += 1
            n_heap = _push_event(heap, n_heap, now + length, seq, j, epoch[j])

    ist[S_FREE], ist[S_SEQ], ist[S_NEXT_ARRIVAL], ist[S_POPPED] = free, seq, next_arrival, popped
    ist[S_NEEDS_PASS], ist[S_N_WAIT], ist[S_N_RUN], ist[S_STARTS] = needs_pass, n_wait, n_run, \
        starts
    ist[S_HEAP], ist[S_RHEAP], ist[S_PENDING], ist[S_N_CONT] = n_heap, n_rheap, resume, n_cont
    fst[F_NOW] = now
    return status
