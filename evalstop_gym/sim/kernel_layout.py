"""The compiled engine's data: the run's constants, the jobs, their outcome and one cluster's
event loop state, as arrays (numba passes NamedTuples of arrays as plain structs), and building
that state before the first event.

The loop's scalars (free GPUs, heap sizes, the clock, ...) sit in two small arrays, `int_slots`
(indexed by the S_* names) and `float_slots` (by the F_* names), so a cluster paused at a
decision keeps them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .borrowed import borrow
from .jit import jitable, njit
from .jobs import STATES, JobState, Phase

# Job states as their index in jobs.STATES, phases as jobs.Phase's values
PENDING, RUNNING, PREEMPTED, COMPLETED, STOPPED = (STATES.index(s) for s in (
    JobState.PENDING, JobState.RUNNING, JobState.PREEMPTED, JobState.COMPLETED, JobState.STOPPED))
IDLE, RESTART, TRAIN, EVAL = (int(p) for p in (Phase.IDLE, Phase.RESTART, Phase.TRAIN, Phase.EVAL))
OK, ERR_LEFT_WAITING, ERR_PAST, ERR_GPUS = 0, 1, 2, 3
DECISION, ROOM = 4, 5    # `advance` paused: a check for the agent; a heap to grow
PASS = 6                 # `advance` paused at a scheduling pass (S_AGENT_PASSES set): the
                         # caller allocates (env/full_step.py) and calls again


class LoopState(NamedTuple):
    """One cluster's event loop between calls of `advance`: what `Cluster` keeps between two
    `next_decision` calls. Heaps are arrays of rows (heapq's order: rows compare as tuples),
    their sizes in `int_slots`; the last row of each is scratch."""

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
    int_slots: np.ndarray    # the loop's scalars, by the S_* names
    float_slots: np.ndarray  # by the F_* names
    continued: np.ndarray    # RULE_AGENT: jobs whose checks were answered "continue" since
                             # the caller last reset int_slots[S_N_CONT] (the reward reads them)


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


# The loop's state between calls of `advance` (a cluster paused at a decision keeps it here):
# int slots of `int_slots`, float slots of `float_slots`
(S_N, S_FREE, S_SEQ, S_NEXT_ARRIVAL, S_POPPED, S_NEEDS_PASS, S_N_WAIT, S_N_RUN, S_STARTS,
 S_HEAP, S_RHEAP, S_PENDING, S_N_CONT, S_AGENT_PASSES) = range(14)
N_INT_SLOTS = 14                               # S_AGENT_PASSES: 1 pauses at every pass (PASS)
F_NOW, F_ANSWER = 0, 1                        # the clock; the answer to the pending check
N_FLOAT_SLOTS = 2
NO_CLASS = 2 ** 62                             # demand of an unused (padding) class slot


@jitable
def setup(total_gpus, arrival, gpus, cls_gpus, cls, cls_off, cls_size, arrivals, int_slots,
          float_slots):
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
    int_slots[:] = 0
    int_slots[S_N], int_slots[S_FREE], int_slots[S_SEQ], int_slots[S_PENDING] = n, total_gpus, n, -1
    float_slots[:] = 0.0


# new_loop, with_room, grown and scratch are plain numpy: only Python calls them (around
# `advance`), so a compiled copy would add to the kernel's cold compile and save nothing
def new_loop(total_gpus, arrival, gpus, n_checks):
    """A cluster's loop state before its first event, for the jobs `arrival`, `gpus`;
    `n_checks`: room for the jobs' checks in `continued` (0 unless under RULE_AGENT)."""
    n = arrival.shape[0]
    cls_gpus, cls = np.empty(n, np.int64), np.empty(n, np.int64)
    cls_off, cls_size = np.zeros(n, np.int64), np.zeros(n, np.int64)
    arrivals = np.empty(n, np.int64)
    int_slots, float_slots = np.zeros(N_INT_SLOTS, np.int64), np.zeros(N_FLOAT_SLOTS)
    setup(total_gpus, arrival, gpus, cls_gpus, cls, cls_off, cls_size, arrivals, int_slots,
          float_slots)
    return LoopState(np.zeros(n, np.int64), cls_gpus, cls, cls_off, cls_size,
                     np.empty(n, np.int64), np.zeros(n, np.int64), np.zeros(n),
                     np.full(n, -1, np.int64), np.empty(n, np.int64), np.full(n, -1, np.int64),
                     np.zeros(n, np.int64), arrivals, np.empty((2 * n + 16, 4)),
                     np.empty((4 * n + 16, 5)), int_slots, float_slots, np.empty(n_checks,
                                                                                 np.int64))


def with_room(loop):
    """`loop` with both heaps twice as large (after `advance` returned ROOM)."""
    return LoopState(loop.phase, loop.cls_gpus, loop.cls, loop.cls_off, loop.cls_size,
                     loop.wait, loop.major, loop.key, loop.run_seq, loop.run_list, loop.run_pos,
                     loop.run_version, loop.arrivals, grown(loop.heap), grown(loop.rheap),
                     loop.int_slots, loop.float_slots, loop.continued)


def grown(h):
    """Heap array h with twice the rows (the contents kept; the last row is scratch)."""
    out = np.empty((2 * h.shape[0], h.shape[1]))
    out[:h.shape[0] - 1] = h[:h.shape[0] - 1]
    return out


def scratch(n):
    """The arrays one scheduling pass works in (shared by clusters run one after the other)."""
    return Scratch(np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                   np.empty(n, np.int64), np.zeros(n + 1, np.int64), np.zeros(n, np.bool_),
                   np.empty(n, np.int64), np.empty(n, np.int64))


@njit(cache=True, inline="always")
def borrowed(jobs, out, loop, space):
    """The four NamedTuples `advance` takes, of views that hold no reference (`borrowed.py`):
    the loop's steps pass them around at no reference-count cost."""
    b = borrow
    return (Jobs(b(jobs.arrival), b(jobs.gpus), b(jobs.duration), b(jobs.dur_est),
                 b(jobs.eval_min), b(jobs.peak), b(jobs.speed), b(jobs.jtype), b(jobs.paced),
                 b(jobs.chk_ptr), b(jobs.chk_prog), b(jobs.chk_work), b(jobs.chk_idx),
                 b(jobs.chk_loss), b(jobs.ev_ptr), b(jobs.ev_score), b(jobs.ev_prog)),
            Outcome(b(out.state), b(out.work), b(out.next_check), b(out.epoch), b(out.has_run),
                    b(out.first_start), b(out.end_time), b(out.gpu_min), b(out.gpu_after),
                    b(out.n_pre), b(out.phase_start), b(out.chk_time), b(out.stop_value)),
            LoopState(b(loop.phase), b(loop.cls_gpus), b(loop.cls), b(loop.cls_off),
                      b(loop.cls_size), b(loop.wait), b(loop.major), b(loop.key),
                      b(loop.run_seq), b(loop.run_list), b(loop.run_pos), b(loop.run_version),
                      b(loop.arrivals), b(loop.heap), b(loop.rheap), b(loop.int_slots),
                      b(loop.float_slots), b(loop.continued)),
            Scratch(b(space.after), b(space.top), b(space.pending), b(space.prefix),
                    b(space.sizes), b(space.keep), b(space.to_start), b(space.to_preempt)))
