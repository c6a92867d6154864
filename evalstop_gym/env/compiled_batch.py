"""`CompiledBatch`: N stop-mode clusters advanced inside compiled code (the `BatchCore` contract).

Each env is the compiled engine's event loop paused at the checks the agent answers; one jitted
call (`batch_step.step_all`) answers every env's pending check, runs it to its next decision,
and writes its observation row, reward and terminated flag, so a step of N envs is one call
from Python. Row i equals `EvalStopClusterEnv(control="stop")` with the same seed and actions,
bit for bit (`tests/test_vector_equivalence.py`): the loop is the one `simulate` runs, and the
reward and observation are the single env's own functions, compiled.

State lives in 2-D arrays (`batch_arrays.py`: a row per env, padded to the largest workload
seen); a reset draws one workload as arrays (`workloads.draw_workload`, no job records) and
stages it; the compiled call packs it into its row (`packing.fill_packed`, `batch_load.py`) and
runs it to its first decision, so the vector env's autoresets ride in the step's own call
(`step_and_reset`). The finished episode's metrics are computed from its arrays by
`metrics.score_table`, as `simulate` does: no job record is made in an episode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from ..config import SimConfig
from ..metrics import JobTruth, score_table, table_of_arrays
from ..policies import BASES, make_base
from ..sim import native_kernel as kernel
from ..sim.jobs import Job
from ..sim.kernel import SimulationError
from ..sim.native_kernel import F_ANSWER, Jobs, Outcome, Platform
from ..sim.packing import Layout, check_layout, check_losses, check_pointers
from ..sim.protocols import capabilities
from ..sim.rules import RULE_AGENT, disagreement
from ..sim.workload import JOB_TYPES, eval_points
from ..sim.workload_arrays import WorkloadArrays, arrays_of
from ..simulate import resolve_config
from ..workloads import draw_workload
from .arguments import check_milestones, check_monitored
from .batch_arrays import R_TOTAL, BatchArrays, allocate, grown_heaps
from .batch_core import check_num_envs, check_stop
from .batch_load import load_rows, stage
from .batch_step import step_all
from .observation import STOP_FIELDS, Limits, StopObservation
from .reward import RewardTerms, weights


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
        self._weights = np.array([*weights(self.config.reward),
                                  self.config.reward.time_scale_min], np.float64)
        n = self.num_envs
        self.obs = {k: np.zeros((n, *s.shape), s.dtype)   # type: ignore[misc]
                    for k, s in self.encoder.space.spaces.items()}
        self.reward = np.zeros(n, np.float64)
        self.terminated = np.ones(n, np.bool_)
        self._asked = np.full(n, -1, np.int64)
        self._workloads: list[WorkloadArrays | None] = [None] * n   # static per-job fields
        self._sizes = np.zeros((n, 3), np.int64)   # each row's jobs, checks and evals
        self._slot = np.full(n, -1, np.int64)       # env i's workload in `_staged`, or -1
        self._nothing_staged = self._staged = stage([])
        self._layouts: dict[bytes, Layout] = {}    # each eval schedule's check points
        self._metrics: list[dict[str, float] | None] = [None] * n
        self._caps = (0, 0, 0)
        self._entry: Callable[..., Any] | None = None
        self._arrays: BatchArrays
        self._scratch: kernel.Scratch
        self._alloc(1, 1, 1)

    # ------------------------------------------------------------------ the contract

    def reset(self, indices: Sequence[int], seeds: Sequence[int]) -> None:
        """Start env indices[k] on the workload of seeds[k] and run it to its first decision."""
        indices, seeds = self._checked(indices, seeds)
        if self._kernel_loads:
            self._stage(indices, seeds)
            self._run(self._slot >= 0, fresh=True)
            self._staged = self._nothing_staged
            return
        todo = np.zeros(self.num_envs, np.bool_)
        for i, seed in zip(indices, seeds, strict=True):
            self._load(i, seed)
            todo[i] = True
        self._run(todo, fresh=True)

    def step(self, stop: np.ndarray) -> None:
        """Answer every live env's pending check (1: stop) and run it to its next decision."""
        self._step(check_stop(stop, self.num_envs))

    def step_and_reset(self, stop: np.ndarray, indices: Sequence[int], seeds: Sequence[int]
                       ) -> None:
        """`step`, and envs `indices` (ended at the last step) reset on `seeds` in the same
        compiled call: their workloads drawn here, packed and run to their first decision in
        compiled code (another control's kernel loads nothing: `step`, then `reset`)."""
        if not self._kernel_loads:
            self.step(stop)
            if len(indices):
                self.reset(indices, seeds)
            return
        checked = check_stop(stop, self.num_envs)
        if len(indices):
            self._stage(*self._checked(indices, seeds))
        self._step(checked)
        self._staged = self._nothing_staged

    def _checked(self, indices: Sequence[int], seeds: Sequence[int]) -> tuple[list[int], list[int]]:
        """`indices` and `seeds` as ints, or a one-line ValueError naming the bad one."""
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
        return [int(i) for i in indices], [int(s) for s in seeds]

    def _step(self, stop: np.ndarray) -> None:
        """Answer the live envs' checks and run them, and the staged ones, on (one call)."""
        self._arrays.loop.float_slots[:, F_ANSWER] = np.where(stop != 0, 1.0, np.nan)
        self.reward[self.terminated] = 0.0
        self._run(~self.terminated | (self._slot >= 0), fresh=True)

    def metrics(self, i: int) -> dict[str, float]:
        """Env i's finished episode's paper metrics (== the single env's info["metrics"])."""
        if not self.terminated[i] or self._workloads[i] is None:
            raise RuntimeError(f"env {i} has no finished episode")
        if self._metrics[i] is None:
            self._metrics[i] = self._score(i)
        return self._metrics[i]   # type: ignore[return-value]

    def reward_terms(self, i: int) -> dict[str, float]:
        """Env i's episode totals (== the single env's info["reward_terms"])."""
        totals = self._arrays.reward_floats[i, R_TOTAL:R_TOTAL + 5].tolist()
        return dict(zip(RewardTerms._fields, totals, strict=True))

    def job_id(self, i: int) -> int:
        """The reporting job's id at env i's current decision (-1 at the end)."""
        return int(self._asked[i])

    def job_ids(self) -> np.ndarray:
        return self._asked.copy()

    # ------------------------------------------------------------------ internals

    _kernel: Any = staticmethod(step_all)   # the compiled call `_run` makes
    _paused = kernel.DECISION                # the status of an env that waits for its agent
    _kernel_loads = True   # `_kernel` loads the staged workloads itself; else `_load` does first

    def _run(self, todo: np.ndarray, fresh: bool) -> None:
        """Run envs `todo` through `_kernel`; the ones whose heaps ran out of room (`ROOM`, they
        did not move) run again on grown heaps, resumed (`fresh` False)."""
        status = np.zeros(self.num_envs, np.int64)
        while True:
            self._step_all(*self._arguments(todo, fresh, status))
            room = status == kernel.ROOM
            bad = (status != kernel.ROOM) & (status != kernel.OK) & (status != self._paused)
            if bad.any():
                raise SimulationError(f"{type(self).__name__}: env {int(np.argmax(bad))} failed "
                                      f"with status {int(status[bad][0])}")
            if not room.any():
                return
            self._arrays = self._arrays._replace(loop=grown_heaps(self._arrays.loop))
            self._entry = None
            todo, fresh = room, False

    def _arguments(self, todo: np.ndarray, fresh: bool, status: np.ndarray) -> tuple[Any, ...]:
        """`step_all`'s arguments."""
        return (self._platform, self._arrays, self._scratch, self._weights, self._asked,
                self.terminated, self.reward, tuple(self.obs[k] for k in STOP_FIELDS),
                self.encoder.bounds, todo, fresh, status, self._staged, self._slot)

    def _step_all(self, *args: Any) -> None:
        """`_kernel(*args)`, through its machine code once it is compiled for these arguments'
        types: numba's dispatcher types all ~80 arrays on every call (measured at N=64: 21 us
        a call, 8 without), and the types stay until the arrays are replaced (typed again)."""
        if self._entry is not None:
            self._entry(*args)
            return
        step = self._kernel
        step(*args)                  # compiled, or loaded from the cache, for these types
        overloads = getattr(step, "overloads", None)   # None: numba is missing
        if overloads is not None:
            compiled = overloads.get(tuple(step.typeof_pyval(a) for a in args))
            self._entry = compiled.entry_point if compiled is not None else step

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the entry point (machine code does not pickle: a copy types its
        arguments again on its first step)."""
        return {**self.__dict__, "_entry": None}

    def _load(self, i: int, seed: int) -> None:
        """Load the workload of `seed` into row i now (a kernel that loads nothing itself)."""
        self._stage([i], [seed])
        load_rows(self._platform.total_gpus, self._arrays, self._staged, self._slot)
        self._staged = self._nothing_staged

    def _stage(self, indices: list[int], seeds: list[int]) -> None:
        """Draw the workloads of `seeds` for envs `indices` and stage them (`batch_load`),
        growing every row when one does not fit; the compiled code loads them."""
        parts: list[tuple[WorkloadArrays, Layout, np.ndarray, np.ndarray]] = []
        for i, seed in zip(indices, seeds, strict=True):
            drawn = self._workload(seed)
            workload = arrays_of(drawn) if isinstance(drawn, list) else drawn
            layout = self._layout(workload)
            chk_ptr = check_pointers(workload, layout)
            n, n_chk, n_ev = workload.n_jobs, int(chk_ptr[-1]), int(workload.ev_ptr[-1])
            if n > self._caps[0] or n_chk > self._caps[1] or n_ev > self._caps[2]:
                self._alloc(max(n, self._caps[0]), max(n_chk, self._caps[1]),
                            max(n_ev, self._caps[2]))
            self._slot[i] = len(parts)
            parts.append((workload, layout, chk_ptr, check_losses(workload, layout, chk_ptr)))
            self._workloads[i], self._sizes[i] = workload, (n, n_chk, n_ev)
            self._asked[i] = -1
            self._metrics[i] = None
        self._staged = stage(parts)

    def _layout(self, workload: WorkloadArrays) -> Layout:
        """The workload's check layout, computed once per set of eval schedules (every
        synthetic workload of a config has the same one)."""
        key = workload.sched_ptr.tobytes() + workload.points.tobytes()
        if key not in self._layouts:
            if len(self._layouts) >= 64:   # workloads that bring schedules of their own
                self._layouts.clear()
            self._layouts[key] = check_layout(workload, self.milestones)
        return self._layouts[key]

    def _workload(self, seed: int) -> WorkloadArrays | list[Job]:
        """The workload of `seed` as arrays: the jobs `EvalStopClusterEnv.reset(seed=seed)`
        runs (no record per job is built on a reset). A subclass may return job records
        instead (a hand-made workload); they are packed through their arrays."""
        return draw_workload(self.config, seed)

    def _score(self, i: int) -> dict[str, float]:
        """Env i's metrics from its arrays, by the function `simulate` scores every run with."""
        extra, jobs = self._arrays.extra, self._arrays.jobs
        n, n_chk, n_ev = self._sizes[i].tolist()
        length = {"chk_ptr": n + 1, "ev_ptr": n + 1}
        length.update({name: n_chk for name in Jobs._fields if name.startswith("chk_")
                       and name != "chk_ptr"})
        length.update({name: n_ev for name in ("ev_score", "ev_prog")})
        packed = {name: getattr(jobs, name)[i, :length.get(name, n)] for name in Jobs._fields}
        out = {name: getattr(self._arrays.out, name)[i, :n_chk if name == "chk_time" else n]
               for name in Outcome._fields}
        workload = self._workloads[i]
        assert workload is not None
        truth = JobTruth(workload.tenant, extra.is_hacking[i, :n], extra.peak_prog[i, :n],
                         extra.ev_point[i, :n_ev], extra.ev_true[i, :n_ev])
        table = table_of_arrays(packed, out, truth)
        return score_table(table, self.config.metrics, self.config.cluster.gpus)[1]

    def _alloc(self, n: int, n_chk: int, n_ev: int) -> None:
        """(Re)allocate every row for n jobs, n_chk checks and n_ev evals, keeping contents."""
        old = None if self._caps == (0, 0, 0) else self._arrays
        self._arrays = allocate(self.num_envs, n, n_chk, n_ev, old)
        self._entry = None
        self._scratch = kernel.scratch(n)
        self._caps = (n, n_chk, n_ev)
