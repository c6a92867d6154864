"""`CompiledBatch`: N stop-mode clusters advanced inside compiled code (the `BatchCore` contract).

Each env is the compiled engine's event loop (`sim.native_kernel.advance`) paused at the checks
the agent answers (`rules.RULE_AGENT`); one jitted `_step_all` answers every env's pending check,
runs it to its next decision, and writes its observation row, reward and terminated flag, so a
step of N envs is one call from Python. Row i equals `EvalStopClusterEnv(control="stop")` with
the same seed and actions, bit for bit (`tests/test_vector_equivalence.py`): the loop is the one
`simulate` runs, the observation's arithmetic is `observation.fill_job_row` /
`fill_cluster_row` and the reward's `reward.segment_waste` / `lost_quality`, compiled, summed in
the reference's order. Observations read only what a view shows (scores, losses, progress,
arrival, the type's estimate, attained minutes); the reward also reads the hidden truth.

State lives in 2-D arrays (a row per env, padded to the largest workload seen); a reset packs
one workload into its row in Python (`native._pack`) and the finished episode's metrics are
scored in Python from the unpacked jobs, as `simulate` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

from ..config import SimConfig
from ..policies import BASES, make_base
from ..sim import native
from ..sim import native_kernel as kernel
from ..sim.jit import njit
from ..sim.jobs import Job
from ..sim.kernel import SimulationError
from ..sim.native_kernel import (
    F_ANSWER,
    F_NOW,
    N_FLOAT_SLOTS,
    N_INT_SLOTS,
    S_FREE,
    S_N,
    S_N_CONT,
    S_N_RUN,
    S_N_WAIT,
    S_PENDING,
    S_POPPED,
    Jobs,
    LoopState,
    Outcome,
    Platform,
)
from ..sim.protocols import capabilities
from ..sim.rules import RULE_AGENT, compiled, decline_count, disagreement
from ..sim.workload import JOB_TYPES, eval_points
from ..simulate import resolve_config, score
from ..workloads import generate_workload
from .arguments import check_milestones, check_monitored
from .batch_core import check_num_envs, check_stop
from .cluster_env import AGENT_STOP
from .observation import Limits, StopObservation, fill_cluster_row, fill_job_row
from .reward import lost_quality, segment_waste

FIELDS = ("job", "cluster", "eval_scores", "eval_deltas", "eval_progress", "eval_mask",
          "loss_history", "loss_mask")
_fill_job_row = njit(cache=True, inline="always")(fill_job_row)
_fill_cluster_row = njit(cache=True, inline="always")(fill_cluster_row)
_segment_waste = njit(cache=True, inline="always")(segment_waste)
_lost_quality = njit(cache=True)(lost_quality)
_decline_count = compiled(decline_count)
# per-env reward state: ints (arrivals admitted, open jobs), floats (booked integrals,
# integrals at the last decision, the episode's term totals)
R_ADMITTED, R_OPEN = 0, 1
R_BOOKED, R_LAST, R_TOTAL = 0, 3, 6
N_REWARD_FLOATS = 11


def _agent_stop_reason(job_type: str, value: float) -> str:
    return AGENT_STOP.reason   # the single env's reason for an agent's stop


class CompiledBatch:
    """N independent `EvalStopCluster-v0` (control="stop") envs on the compiled engine."""

    def __init__(self, num_envs: int, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", monitored: Sequence[str] = ("rlhf", "dpo"),
                 milestones: Sequence[float] = (), **overrides: Any) -> None:
        num_envs = check_num_envs(num_envs)
        self.config = resolve_config(config, overrides)
        base = make_base(base_scheduler)
        self.monitored = check_monitored(monitored)
        self.milestones = check_milestones(milestones)
        if self.config.cluster.kinds:
            raise ValueError("CompiledBatch runs homogeneous clusters only: cluster.kinds is set "
                             "(use EvalStopClusterEnv)")
        spec = capabilities(base).native
        if spec is None or disagreement(spec):
            why = disagreement(spec) if spec else "it has no compiled form"
            known = [name for name in BASES if capabilities(BASES[name]()).native is not None]
            raise ValueError(f"base_scheduler={base_scheduler!r}: {why}; choose one with a "
                             f"native key ({', '.join(known)})")
        self.num_envs = int(num_envs)
        cluster = self.config.cluster
        self._platform = Platform(
            int(cluster.gpus), float(cluster.preemption_overhead_min), spec.key,
            spec.preemptive, RULE_AGENT,
            np.array([int(t in self.monitored) for t in JOB_TYPES], np.int64), False, 0.0, 0.0,
            0, float(cluster.time_slice_share), spec.time_sliced, spec.rekeys_at_checks,
            spec.rekeys_at_passes)
        n_evals = len(eval_points(self.config.evals.interval, self.config.evals.final))
        self.encoder = StopObservation(n_evals, n_evals + len(self.milestones),
                                       Limits.of(self.config, n_evals))
        self.single_observation_space: spaces.Dict = self.encoder.space
        boxes = [self.encoder.space[k] for k in ("job", "cluster", "eval_scores", "eval_deltas",
                                                 "eval_progress", "loss_history")]
        self._bounds = tuple((np.asarray(b.low, np.float64), np.asarray(b.high, np.float64))
                             for b in boxes if isinstance(b, spaces.Box))
        w = self.config.reward
        self._weights = np.array([w.jobs_in_system, w.gpu_minutes, w.wasted_gpu_minutes,
                                  w.quality_lost, w.false_stop, w.time_scale_min], np.float64)
        n = self.num_envs
        self.obs = {k: np.zeros((n, *s.shape), s.dtype)   # type: ignore[misc]
                    for k, s in self.encoder.space.spaces.items()}
        self.reward = np.zeros(n, np.float64)
        self.terminated = np.ones(n, np.bool_)
        self._asked = np.full(n, -1, np.int64)
        self._jobs: list[list[Job] | None] = [None] * n
        self._packed: list[dict[str, np.ndarray] | None] = [None] * n
        self._seeds = [-1] * n
        self._metrics: list[dict[str, float] | None] = [None] * n
        self._caps = (0, 0, 0)
        self._job_arrays: Jobs
        self._out: Outcome
        self._loop: LoopState
        self._extra: Extra
        self._open: np.ndarray
        self._order: np.ndarray
        self._alloc(1, 1, 1)

    # ------------------------------------------------------------------ the contract

    def reset(self, indices: Sequence[int], seeds: Sequence[int]) -> None:
        """Start env indices[k] on the workload of seeds[k] and run it to its first decision."""
        indices, seeds = list(indices), list(seeds)
        if len(indices) != len(seeds):
            raise ValueError(f"indices and seeds differ in length: {len(indices)} and "
                             f"{len(seeds)}")
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) \
                    or not 0 <= i < self.num_envs:
                raise ValueError(f"indices: {i!r} is not an env index in [0, {self.num_envs})")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
                raise ValueError(f"seeds: {s!r} is not a whole number >= 0")
        todo = np.zeros(self.num_envs, np.bool_)
        for i, seed in zip(indices, seeds, strict=True):
            self._load(int(i), int(seed))
            todo[i] = True
        self._run(todo, fresh=True)

    def step(self, stop: np.ndarray) -> None:
        """Answer every live env's pending check (1: stop) and run it to its next decision."""
        stop = check_stop(stop, self.num_envs)
        live = ~self.terminated
        self._loop.fst[:, F_ANSWER] = np.where(stop != 0, 1.0, np.nan)
        self.reward[self.terminated] = 0.0
        self._run(live, fresh=True)

    def metrics(self, i: int) -> dict[str, float]:
        """Env i's finished episode's paper metrics (== the single env's info["metrics"])."""
        if not self.terminated[i] or self._jobs[i] is None:
            raise RuntimeError(f"env {i} has no finished episode")
        if self._metrics[i] is None:
            self._metrics[i] = self._score(i)
        return self._metrics[i]   # type: ignore[return-value]

    def reward_terms(self, i: int) -> dict[str, float]:
        """Env i's episode totals (== the single env's info["reward_terms"])."""
        totals = self._rfl[i, R_TOTAL:R_TOTAL + 5].tolist()
        return dict(zip(("jobs_in_system", "gpu_minutes", "wasted_gpu_minutes", "quality_lost",
                         "false_stop"), totals, strict=True))

    def job_id(self, i: int) -> int:
        """The reporting job's id at env i's current decision (-1 at the end)."""
        return int(self._asked[i])

    # ------------------------------------------------------------------ internals

    def _run(self, todo: np.ndarray, fresh: bool) -> None:
        status = np.zeros(self.num_envs, np.int64)
        while True:
            _step_all(self._platform, self._job_arrays, self._out, self._loop, self._scratch,
                      self._rint, self._rfl, self._open, self._order, self._extra,
                      self._weights, self._asked, self.terminated, self.reward,
                      *(self.obs[k] for k in FIELDS), *self._bounds, todo, fresh, status)
            room = status == kernel.ROOM
            bad = (status != kernel.ROOM) & (status != kernel.OK) & (status != kernel.DECISION)
            if bad.any():
                raise SimulationError(f"compiled batch: env {int(np.argmax(bad))} failed with "
                                      f"status {int(status[bad][0])}")
            if not room.any():
                return
            self._grow_heaps()
            todo, fresh = room, False

    def _load(self, i: int, seed: int) -> None:
        """Pack the workload of `seed` into row i (growing every row when it does not fit)."""
        jobs = self._workload(seed)
        packed = native._pack(jobs, self.milestones)
        n, n_chk, n_ev = len(jobs), len(packed["chk_prog"]), len(packed["ev_score"])
        if n > self._caps[0] or n_chk > self._caps[1] or n_ev > self._caps[2]:
            self._alloc(max(n, self._caps[0]), max(n_chk, self._caps[1]),
                        max(n_ev, self._caps[2]))
        J, outs, L = self._job_arrays, self._out, self._loop
        for name in Jobs._fields:
            row = getattr(J, name)[i]
            value = packed[name]
            row[:len(value)] = value
        e = self._extra
        e.is_hacking[i, :n] = [j.is_hacking for j in jobs]
        e.peak_prog[i, :n] = [j.peak_progress for j in jobs]
        self._truth(i, jobs, packed)
        outs.state[i], outs.work[i], outs.next_check[i], outs.epoch[i] = 0, 0.0, 0, 0
        outs.has_run[i], outs.first_start[i], outs.end_time[i] = False, np.nan, np.nan
        outs.gpu_min[i], outs.gpu_after[i], outs.n_pre[i], outs.phase_start[i] = 0.0, 0.0, 0, 0.0
        outs.chk_time[i], outs.stop_value[i] = np.nan, np.nan
        L.phase[i], L.major[i], L.key[i], L.run_version[i] = 0, 0, 0.0, 0
        L.run_seq[i], L.run_pos[i] = -1, -1
        kernel.setup(self._platform.total_gpus, packed["arrival"], packed["gpus"],
                     L.cls_gpus[i], L.cls[i], L.cls_off[i], L.cls_size[i], L.arrivals[i],
                     L.ist[i], L.fst[i])
        self._order[i, :n] = L.arrivals[i, :n]
        self._rint[i] = 0
        self._rfl[i] = 0.0
        self._jobs[i], self._packed[i], self._seeds[i] = jobs, packed, seed
        self._asked[i] = -1
        self._metrics[i] = None

    def _truth(self, i: int, jobs: list[Job], packed: dict[str, np.ndarray]) -> None:
        """Row i's best true score per job and true score of each eval's checkpoint
        (`quality_lost`'s `np.max(eval_true)` and `true_score_at`), a matrix at a time when the
        jobs share their number of eval points."""
        e, ev_ptr, n = self._extra, packed["ev_ptr"], len(jobs)
        if len({len(j.eval_points) for j in jobs}) == 1 and len(jobs[0].eval_points):
            points = np.stack([j.eval_points for j in jobs])
            truth = np.stack([j.eval_true for j in jobs])
            e.best_true[i, :n] = truth.max(axis=1)
            owner = np.repeat(np.arange(n), np.diff(ev_ptr))
            at = np.argmin(np.abs(points[owner] - packed["ev_prog"][:, None]), axis=1)
            e.kept_true[i, :len(owner)] = truth[owner, at]
            return
        for k, job in enumerate(jobs):
            e.best_true[i, k] = float(np.max(job.eval_true)) if len(job.eval_true) else np.nan
            lo, hi = int(ev_ptr[k]), int(ev_ptr[k + 1])
            if hi > lo:
                prog = packed["ev_prog"][lo:hi]
                at = np.argmin(np.abs(job.eval_points[None, :] - prog[:, None]), axis=1)
                e.kept_true[i, lo:hi] = job.eval_true[at]

    def _workload(self, seed: int) -> list[Job]:
        """The jobs of `seed`: those `EvalStopClusterEnv.reset(seed=seed)` runs."""
        return generate_workload(self.config, seed)

    def _score(self, i: int) -> dict[str, float]:
        """Env i's jobs written back (`native._unpack`) and scored as `episode_result` does."""
        jobs, packed = self._jobs[i], self._packed[i]
        assert jobs is not None and packed is not None
        n, n_chk = len(jobs), len(packed["chk_prog"])
        packed = {**packed, "speed": self._job_arrays.speed[i, :n].copy()}
        out = {name: getattr(self._out, name)[i, :n_chk if name == "chk_time" else n].copy()
               for name in Outcome._fields}
        native._unpack(jobs, packed, out, _agent_stop_reason)
        events = int(self._loop.ist[i, S_POPPED])
        return score(self.config, events, jobs, "env:stop", self._seeds[i]).metrics

    def _alloc(self, n: int, n_chk: int, n_ev: int) -> None:
        """(Re)allocate every row for n jobs, n_chk checks and n_ev evals, keeping contents."""
        N = self.num_envs
        old = None if self._caps == (0, 0, 0) else (self._job_arrays, self._out, self._loop,
                                                     self._extra, self._open, self._order)
        size = {"job": n, "ptr": n + 1, "chk": n_chk, "ev": n_ev}
        rows = (2 * n + 17, 4 * n + 17)         # heaps keep what they grew to
        if old is not None:
            rows = (max(rows[0], old[2].heap.shape[1]), max(rows[1], old[2].rheap.shape[1]))

        def arr(kind: str, dtype: Any, fill: Any = 0) -> np.ndarray:
            return np.full((N, size[kind]), fill, dtype)

        self._job_arrays = Jobs(
            arr("job", np.float64), arr("job", np.int64, 1), arr("job", np.float64, 1.0),
            arr("job", np.float64), arr("job", np.float64), arr("job", np.float64),
            arr("job", np.float64, 1.0), arr("job", np.int64), arr("job", np.bool_),
            arr("ptr", np.int64), arr("chk", np.float64), arr("chk", np.float64),
            arr("chk", np.int64), arr("chk", np.float64), arr("ptr", np.int64),
            arr("ev", np.float64), arr("ev", np.float64))
        self._out = Outcome(
            arr("job", np.int64), arr("job", np.float64), arr("job", np.int64),
            arr("job", np.int64), arr("job", np.bool_), arr("job", np.float64, np.nan),
            arr("job", np.float64, np.nan), arr("job", np.float64), arr("job", np.float64),
            arr("job", np.int64), arr("job", np.float64), arr("chk", np.float64, np.nan),
            arr("job", np.float64, np.nan))
        self._loop = LoopState(
            arr("job", np.int64), arr("job", np.int64), arr("job", np.int64),
            arr("job", np.int64), arr("job", np.int64), arr("job", np.int64),
            arr("job", np.int64), arr("job", np.float64), arr("job", np.int64, -1),
            arr("job", np.int64), arr("job", np.int64, -1), arr("job", np.int64),
            arr("job", np.int64), np.zeros((N, rows[0], 4)), np.zeros((N, rows[1], 5)),
            np.zeros((N, N_INT_SLOTS), np.int64), np.zeros((N, N_FLOAT_SLOTS)),
            arr("chk", np.int64))
        self._extra = Extra(arr("job", np.bool_), arr("job", np.float64),
                            arr("job", np.float64), arr("ev", np.float64))
        self._open, self._order = arr("job", np.int64), arr("job", np.int64)
        if old is not None:
            for new_t, old_t in zip((self._job_arrays, self._out, self._loop, self._extra),
                                    old[:4], strict=True):
                for a, b in zip(new_t, old_t, strict=True):
                    if a.ndim == 3:
                        a[:, :b.shape[1] - 1] = b[:, :-1]
                    else:
                        a[:, :b.shape[1]] = b
            self._open[:, :old[4].shape[1]] = old[4]
            self._order[:, :old[5].shape[1]] = old[5]
        else:
            self._rint = np.zeros((N, 2), np.int64)
            self._rfl = np.zeros((N, N_REWARD_FLOATS))
        self._scratch = kernel.scratch(n)
        self._caps = (n, n_chk, n_ev)

    def _grow_heaps(self) -> None:
        L = self._loop
        heap, rheap = L.heap, L.rheap
        bigger = [np.zeros((h.shape[0], 2 * h.shape[1], h.shape[2])) for h in (heap, rheap)]
        for new, old in zip(bigger, (heap, rheap), strict=True):
            new[:, :old.shape[1] - 1] = old[:, :-1]
        self._loop = L._replace(heap=bigger[0], rheap=bigger[1])


class Extra(NamedTuple):
    """What the reward reads beyond the engine's arrays (hidden truth; never the observation)."""

    is_hacking: np.ndarray
    peak_prog: np.ndarray    # true peak progress
    best_true: np.ndarray    # best true score of the schedule; NaN: the job has no evals
    kept_true: np.ndarray    # per eval (ev_* layout): the true score of its checkpoint


# ---------------------------------------------------------------------------- compiled


@njit(cache=True, inline="always")
def _jobs_row(J, i):
    return Jobs(J.arrival[i], J.gpus[i], J.duration[i], J.dur_est[i], J.eval_min[i],
                J.peak[i], J.speed[i], J.jtype[i], J.paced[i], J.chk_ptr[i], J.chk_prog[i],
                J.chk_work[i], J.chk_idx[i], J.chk_loss[i], J.ev_ptr[i], J.ev_score[i],
                J.ev_prog[i])


@njit(cache=True, inline="always")
def _out_row(outs, i):
    return Outcome(outs.state[i], outs.work[i], outs.next_check[i], outs.epoch[i],
                   outs.has_run[i], outs.first_start[i], outs.end_time[i], outs.gpu_min[i],
                   outs.gpu_after[i], outs.n_pre[i], outs.phase_start[i], outs.chk_time[i],
                   outs.stop_value[i])


@njit(cache=True, inline="always")
def _loop_row(L, i):
    return LoopState(L.phase[i], L.cls_gpus[i], L.cls[i], L.cls_off[i], L.cls_size[i],
                     L.wait[i], L.major[i], L.key[i], L.run_seq[i], L.run_list[i],
                     L.run_pos[i], L.run_version[i], L.arrivals[i], L.heap[i], L.rheap[i],
                     L.ist[i], L.fst[i], L.continued[i])


@njit(cache=True, inline="always")
def _put(rows, i, k, value, bounds):
    """`_clipped` of one value: np.clip to the Box bounds, then float32."""
    if value < bounds[0][k]:
        value = bounds[0][k]
    if value > bounds[1][k]:
        value = bounds[1][k]
    rows[i, k] = np.float32(value)


@njit(cache=True, inline="always")
def _reward(i, now, answered, stopped, jobs, out, loop, ist, rint, rfl, open_, order, extra,
            weights):
    """RewardMeter.step (stop mode) of env i; returns the weighted reward."""
    (arrival, gpus, duration, _, eval_min, peak, speed, _, _, chk_ptr, chk_prog, chk_work,
     chk_idx, _, ev_ptr, ev_score, _) = jobs
    n = ist[S_N]
    # _integrals: admit arrivals, book ended jobs (arrival order), sum the open ones
    admitted, n_open = rint[i, R_ADMITTED], rint[i, R_OPEN]
    while admitted < n and arrival[order[admitted]] <= now:
        open_[n_open] = order[admitted]
        n_open += 1
        admitted += 1
    b0, b1, b2 = rfl[i, R_BOOKED], rfl[i, R_BOOKED + 1], rfl[i, R_BOOKED + 2]
    s0, s1, s2 = 0.0, 0.0, 0.0                # one pass: each sum keeps the reference's order
    kept = 0
    for q in range(n_open):
        j = open_[q]
        if not np.isnan(out.end_time[j]):
            b0 = b0 + out.end_time[j] - arrival[j]
            b1 = b1 + out.gpu_min[j]
            b2 = b2 + out.gpu_after[j]
        else:
            open_[kept] = j
            kept += 1
            s0 += now - arrival[j]
            s1 += out.gpu_min[j]
            s2 += out.gpu_after[j]
    n_open = kept
    held = 0.0
    for q in range(ist[S_N_RUN]):             # Cluster.running's order: by start
        j = loop.run_list[q]
        if loop.phase[j] != 0:
            held += gpus[j] * (now - out.phase_start[j])
    i0, i1, i2 = b0 + s0, b1 + s1 + held, b2 + s2
    rint[i, R_ADMITTED], rint[i, R_OPEN] = admitted, n_open
    rfl[i, R_BOOKED], rfl[i, R_BOOKED + 1], rfl[i, R_BOOKED + 2] = b0, b1, b2
    d0, d1 = i0 - rfl[i, R_LAST], i1 - rfl[i, R_LAST + 1]
    rfl[i, R_LAST], rfl[i, R_LAST + 1], rfl[i, R_LAST + 2] = i0, i1, i2
    wasted = 0.0                              # charged to the continues (committed_waste)
    for q in range(ist[S_N_CONT]):
        j = loop.continued[q]
        c = chk_ptr[j] + out.next_check[j]
        if c < chk_ptr[j + 1]:
            wasted += _segment_waste(chk_prog[c], chk_idx[c], chk_work[c], out.work[j],
                                     peak[j], extra.peak_prog[j], duration[j], speed[j],
                                     eval_min[j], gpus[j])
    lost, false_stop = 0.0, 0.0
    if stopped:
        j = answered
        if not np.isnan(extra.best_true[j]):  # quality_lost: the first best eval is kept
            _, n_evals = kernel.passed(j, chk_ptr, chk_idx, out.next_check)
            best = -1
            for e in range(ev_ptr[j], ev_ptr[j] + n_evals):
                if best < 0 or ev_score[e] > ev_score[best]:
                    best = e
            lost = _lost_quality(extra.best_true[j], extra.kept_true[best] if best >= 0
                                 else 0.0)
        false_stop = 0.0 if extra.is_hacking[j] else 1.0
    scale = weights[5]
    t0, t1, t2 = d0 / scale, d1 / scale, wasted / scale
    rfl[i, R_TOTAL] += t0
    rfl[i, R_TOTAL + 1] += t1
    rfl[i, R_TOTAL + 2] += t2
    rfl[i, R_TOTAL + 3] += lost
    rfl[i, R_TOTAL + 4] += false_stop
    return -(weights[0] * t0 + weights[1] * t1 + weights[2] * t2 + weights[3] * lost
             + weights[4] * false_stop)


@njit(cache=True, inline="always")
def _observe(i, j, now, total_gpus, jobs, out, ist, o_job, o_cluster, o_scores, o_deltas,
             o_prog, o_mask, o_loss, o_lmask, b_job, b_cluster, b_scores, b_deltas, b_prog,
             b_loss, tmp):
    """StopObservation.encode of job j's check, from what its view holds."""
    (arrival, gpus, _, dur_est, _, _, _, jtype, _, chk_ptr, chk_prog, _, chk_idx, chk_loss,
     ev_ptr, ev_score, ev_prog) = jobs
    passed = out.next_check[j]
    c = chk_ptr[j] + passed - 1               # the check just reached
    _, n_ev = kernel.passed(j, chk_ptr, chk_idx, out.next_check)
    e0 = ev_ptr[j]
    scores = ev_score[e0:e0 + n_ev]
    progress = chk_prog[c]
    last, best = 0.0, 0.0
    if n_ev > 0:
        last = scores[n_ev - 1]
        best = scores[0]
        for e in range(1, n_ev):
            if scores[e] > best:
                best = scores[e]
    _fill_job_row(tmp, jtype[j], progress, n_ev > 0 and ev_prog[e0 + n_ev - 1] == progress,
                  n_ev, last, best, _decline_count(scores, False, 0), chk_loss[c], passed,
                  chk_loss[c - 1] if passed >= 2 else 0.0, chk_loss[c], dur_est[j], gpus[j],
                  now - arrival[j], out.gpu_min[j] / gpus[j], out.n_pre[j])
    for k in range(o_job.shape[1]):
        _put(o_job, i, k, tmp[k], b_job)
    _fill_cluster_row(tmp, now, total_gpus, ist[S_FREE], ist[S_N_WAIT], ist[S_N_RUN])
    for k in range(o_cluster.shape[1]):
        _put(o_cluster, i, k, tmp[k], b_cluster)
    h = o_scores.shape[1]
    for k in range(h):
        o_scores[i, k], o_deltas[i, k], o_prog[i, k], o_mask[i, k] = 0.0, 0.0, 0.0, 0
    tail = min(n_ev, h)
    for t in range(tail):
        e = n_ev - tail + t
        k = h - tail + t
        _put(o_scores, i, k, scores[e], b_scores)
        _put(o_deltas, i, k, scores[e] - scores[e - 1 if e > 0 else 0], b_deltas)
        _put(o_prog, i, k, ev_prog[e0 + e], b_prog)
        o_mask[i, k] = 1
    h = o_loss.shape[1]
    for k in range(h):
        o_loss[i, k], o_lmask[i, k] = 0.0, 0
    tail = min(passed, h)
    for t in range(tail):
        k = h - tail + t
        _put(o_loss, i, k, chk_loss[chk_ptr[j] + passed - tail + t], b_loss)
        o_lmask[i, k] = 1


@njit(cache=True)
def _step_all(spec, J, outs, L, sc, rint, rfl, open_, order, X, weights, asked, terminated,
              reward, o_job, o_cluster, o_scores, o_deltas, o_prog, o_mask, o_loss, o_lmask,
              b_job, b_cluster, b_scores, b_deltas, b_prog, b_loss, todo, fresh, status):
    """Advance every env with todo[i] to its next decision (or its end) and write its rows.
    `fresh`: a new answer (fst[F_ANSWER]) or a reset; False resumes envs that ran out of heap
    room mid-step (`ROOM`), which keep their answer and their continued jobs."""
    tmp = np.empty(max(o_job.shape[1], o_cluster.shape[1], L.run_list.shape[1]), np.float64)
    for i in range(todo.shape[0]):
        if not todo[i]:
            continue
        jobs, out, loop = _jobs_row(J, i), _out_row(outs, i), _loop_row(L, i)
        ist = L.ist[i]
        if fresh:
            ist[S_N_CONT] = 0
        answered = asked[i]
        stopped = answered >= 0 and not np.isnan(L.fst[i, F_ANSWER])
        st = kernel.advance(spec, jobs, out, loop, sc)
        status[i] = st
        if st != kernel.OK and st != kernel.DECISION:
            continue
        now = L.fst[i, F_NOW]
        value = _reward(i, now, answered, stopped, jobs, out, loop, ist, rint, rfl, open_[i],
                        order[i], Extra(X.is_hacking[i], X.peak_prog[i], X.best_true[i],
                                        X.kept_true[i]), weights)
        reward[i] = value if answered >= 0 else 0.0
        if st == kernel.DECISION:
            j = ist[S_PENDING]
            asked[i] = j
            terminated[i] = False
            _observe(i, j, now, spec.total_gpus, jobs, out, ist, o_job, o_cluster, o_scores,
                     o_deltas, o_prog, o_mask, o_loss, o_lmask, b_job, b_cluster, b_scores,
                     b_deltas, b_prog, b_loss, tmp)
        else:
            asked[i] = -1
            terminated[i] = True
            o_job[i], o_cluster[i], o_scores[i], o_deltas[i] = 0.0, 0.0, 0.0, 0.0
            o_prog[i], o_mask[i], o_loss[i], o_lmask[i] = 0.0, 0, 0.0, 0
