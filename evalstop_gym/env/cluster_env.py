"""`EvalStopCluster-v0`: the simulator as a Gymnasium environment (a thin adapter).

The env drives the same pull-based loop as `Cluster.run` (`next_decision` / `answer_check` /
`answer_schedule`), with the agent answering the requests its control mode hands it and the base
scheduler (or "continue") answering the rest, so the env path and `simulate` run identical code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..config import SimConfig
from ..policies import make_base
from ..sim.cluster import CheckRequest, Cluster, ScheduleRequest
from ..sim.jobs import Job
from ..sim.protocols import CONTINUE, Action, Allocation, StopDecision
from ..sim.view import ClusterView, SchedulerJobView
from ..sim.workload import eval_points
from ..simulate import RunResult, make_cluster, resolve_config, score
from .arguments import check_max_jobs, check_milestones, check_monitored, full_action, stop_action
from .observation import Limits, Obs, StopObservation, TableObservation
from .render import RENDER_MODES, ClusterRenderer
from .reward import RewardMeter

CONTROLS = ("stop", "full")
UNSEEDED_SEED_RANGE = (10_000, 2**31 - 1)   # unseeded resets never replay the paper's seeds
AGENT_STOP = StopDecision(Action.STOP, "stopped by agent")


class EvalStopClusterEnv(gym.Env):
    """A multi-tenant GPU cluster running LLM fine-tuning jobs whose evals may collapse.

    ## Description
    One episode is one simulated run (a seeded workload, 200 jobs by default); one step is one
    decision point. Some RLHF jobs reward-hack: their eval score peaks and then declines. The
    agent decides which jobs to stop early (keeping their best checkpoint) and, in
    control="full", also which waiting job gets free GPUs first. It sees jobs only through the
    scheduler's information boundary (`SchedulerJobView`): never curves, durations or labels.

    ## Action Space
    - control="stop": `Discrete(2)` for the job that just reported: 0 continue, 1 stop.
    - control="full": `MultiDiscrete([2] * max_jobs + [max_jobs + 1])`: a stop bit per table row
      (honoured for running jobs only), then 0 (let the base scheduler allocate) or 1 + row of a
      waiting job to start first; the base scheduler then backfills what still fits, without
      preempting. Invalid parts of any action are ignored (never an error, never over-allocation);
      `action_masks()` gives the valid options flat, as MaskablePPO wants.
    `info["action_mask"]` holds them in Gymnasium's format for the space, so
    `env.action_space.sample(mask=info["action_mask"])` works: an int8 array (stop), a tuple of
    int8 arrays, one per component (full). In control="stop" anything but 0 or 1 (as an int or a
    one-element integer array) is a ValueError; in control="full" a non-integer action is.

    ## Observation Space
    A `Dict` of float32 Boxes with their true bounds and MultiBinary masks (see `observation.py`;
    `JOB_FIELDS`, `ROW_FIELDS`, `CLUSTER_FIELDS` name the columns). For `VecNormalize`, use
    `evalstop_gym.env.sb3.MaskedVecNormalize`, which leaves the masks out.

    | mode | key | shape | content |
    |---|---|---|---|
    | stop | job | (16,) | the reporting job's `JOB_FIELDS`: type one-hot, progress, is_eval, |
    |      |     |       | n_evals, last score, declines, last - best, loss, loss change, ... |
    | stop | eval_scores, eval_deltas, eval_progress | (H,) | all evals so far, latest last |
    | stop | eval_mask | (H,) MultiBinary | which eval slots hold an eval (H = evals per job) |
    | stop | loss_history, loss_mask | (H + milestones,) | loss at each check passed |
    | full | jobs | (max_jobs * 19,) | row-major table: state one-hot + `JOB_FIELDS` per job |
    | full | job_mask | (max_jobs,) MultiBinary | rows holding a job (running, then waiting) |
    | both | cluster | (5,) | free-GPU fraction, queue / 64, running / 64, time / 1000, GPUs / 64 |

    ## Rewards
    Minus the weighted terms of `reward.py` (weights: `config.reward`): jobs in system over time
    (sums to -total JCT / time_scale), GPU-minutes held, GPU-minutes trained past true peaks, the
    true quality a stop gives up, and stops of jobs that were not hacking (false alarms). The
    reward uses hidden truth; observations never do.

    ## Starting State
    `reset(seed=s)` builds the workload of seed `s`, the same jobs `simulate(config, policy, s)`
    runs, and advances to the first decision point. `reset()` without a seed draws a workload seed
    in [10000, 2**31) from the env's generator.

    ## Episode End
    `terminated` when every job has ended; then `info["metrics"]` holds the run's paper metrics
    and `info["reward_terms"]` the episode's unweighted term sums. Never truncated (add a
    `TimeLimit` wrapper for a step budget). Every `info["ended_jobs"]` holds the views of the jobs
    that ended since the previous step, what `on_job_end` receives in `simulate` (for detectors
    that learn across jobs). In control="stop", `info["view"]` and `info["cluster"]` are the
    reporting job's `SchedulerJobView` and the `ClusterView`, what a detector's `decide` receives
    in `simulate` (exact, where the float32 observation is rounded). No per-job hidden label
    appears in `info`.

    ## Rendering
    `render_mode="ansi"`: a text snapshot (running and queued jobs, free GPUs, the last
    decisions); `"rgb_array"`: a (64, steps, 3) picture of the GPUs each job type held at each of
    the latest 128 decision points.

    ## Arguments
    `config`: experiment name ("e2"), "defaults", a YAML path, or a `SimConfig`.
    `base_scheduler`: a registered base ("SRTF-Est"). `control`: "stop" or "full". `monitored`:
    a sequence of job types whose checks are decision points in control="stop" (others
    continue). `milestones`: extra progress points in (0, 1) to be asked at (e.g. (0.65,) for
    StopAt-0.65). `max_jobs`: table rows in control="full" (1 to 4096).
    `overrides` and any other keyword: dotted config overrides, e.g. `**{"noise.sigma": 0.05}`.
    In control="full" checks are answered "continue": every eval result triggers a scheduling pass
    at the same minute, where the agent can stop the job before it trains further.

    ## Version History
    - v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, config: str | SimConfig = "e2", base_scheduler: str = "SRTF-Est",
                 control: str = "stop", monitored: Sequence[str] = ("rlhf", "dpo"),
                 milestones: Iterable[float] = (), max_jobs: int = 64,
                 overrides: Mapping[str, Any] | None = None, render_mode: str | None = None,
                 **dotted_overrides: Any) -> None:
        if control not in CONTROLS:
            raise ValueError(f"control={control!r}: choose one of {', '.join(CONTROLS)}")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode={render_mode!r}: choose None or one of "
                             f"{', '.join(RENDER_MODES)}")
        if overrides is not None and not isinstance(overrides, Mapping):
            resolve_config(config, overrides)   # raises, naming the argument
        self.config = resolve_config(config, {**(overrides or {}), **dotted_overrides})
        if control == "full" and self.config.cluster.kinds:
            raise ValueError("control='full' supports homogeneous clusters only: cluster.kinds "
                             "is set (use control='stop', where the base scheduler places jobs)")
        self.base = make_base(base_scheduler)
        self.control = control
        self.monitored = check_monitored(monitored)
        self.milestones = check_milestones(milestones)
        max_jobs = check_max_jobs(max_jobs)
        self.render_mode = render_mode
        self._renderer = ClusterRenderer(self.config.cluster.gpus)
        n_evals = len(eval_points(self.config.evals.interval, self.config.evals.final))
        limits = Limits.of(self.config, n_evals)
        if control == "stop":
            self.encoder: StopObservation | TableObservation = StopObservation(
                n_evals, n_evals + len(self.milestones), limits)
            self.action_space: spaces.Space = spaces.Discrete(2)
        else:
            self.encoder = TableObservation(max_jobs, limits)
            self.action_space = spaces.MultiDiscrete([2] * max_jobs + [max_jobs + 1])
        self.observation_space = self.encoder.space
        self._cluster: Cluster | None = None
        self._planner: Any = None   # the base's incremental plan (stop mode), set at reset
        self._jobs: list[Job] = []
        self._request: CheckRequest | ScheduleRequest | None = None
        self._rows: list[SchedulerJobView] = []
        self._ended: list[SchedulerJobView] = []   # views of jobs ended since the last info
        self._seed = -1

    # ------------------------------------------------------------------ Gymnasium API

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        self._seed = int(seed) if seed is not None else int(
            self.np_random.integers(*UNSEEDED_SEED_RANGE))
        self.base.reset()
        self._cluster, self._jobs = make_cluster(self.config, self._seed, self.milestones)
        # the base allocates in both modes (all of it in stop mode, what the agent leaves in
        # full mode), so the cluster takes its time slicing either way; stop mode answers its
        # passes through the base's incremental plan where it has one
        self._cluster.adopt(self.base)
        self._planner = self._cluster.planner_for(self.base) if self.control == "stop" else None
        self._ended = []
        self._meter = RewardMeter(self.config.reward, self._cluster, self._jobs,
                                  wasted_on_decision=self.control == "stop")
        continued: list[Job] = []
        self._request = self._advance(continued)
        self._meter.step([], continued)
        self._renderer.reset()
        self._renderer.record(self._cluster)
        return self._observe(), self._info()

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self._cluster is None:
            raise RuntimeError("call reset() before step()")
        if self._request is None:
            return self._observe(), 0.0, True, False, self._info()
        stopped: list[Job] = []
        continued: list[Job] = []
        if isinstance(self._request, CheckRequest):
            self._answer_check(action, stopped, continued)
        else:
            self._answer_schedule(action, stopped)
        self._request = self._advance(continued)
        terms = self._meter.step(stopped, continued)
        self._renderer.record(self._cluster)
        return (self._observe(), terms.weighted(self.config.reward), self._request is None,
                False, self._info())

    def render(self) -> str | np.ndarray | None:
        """The text snapshot ("ansi") or the occupancy picture ("rgb_array"); None otherwise."""
        if self.render_mode == "ansi":
            return self._renderer.ansi(self._cluster)
        if self.render_mode == "rgb_array":
            return self._renderer.rgb()
        return None

    def action_masks(self) -> np.ndarray:
        """Valid options, flat over the action's components (sb3-contrib MaskablePPO)."""
        if self.control == "stop":
            return np.ones(2, dtype=bool)
        n = self.encoder.max_jobs  # type: ignore[union-attr]
        stop_ok = np.zeros((n, 2), dtype=bool)
        stop_ok[:, 0] = True
        pick_ok = np.zeros(n + 1, dtype=bool)
        pick_ok[0] = True
        if isinstance(self._request, ScheduleRequest):
            free = self._request.cluster.free_gpus
            for i, job in enumerate(self._rows):
                stop_ok[i, 1] = job.state == "running"
                pick_ok[i + 1] = job.state != "running" and job.gpus <= free
        return np.concatenate([stop_ok.reshape(-1), pick_ok])

    def _gym_mask(self) -> np.ndarray | tuple[np.ndarray, ...]:
        """`action_masks()` in Gymnasium's format for the action space (what `sample` takes)."""
        flat = self.action_masks().astype(np.int8)
        if self.control == "stop":
            return flat
        n = self.encoder.max_jobs  # type: ignore[union-attr]
        return (*flat[:2 * n].reshape(n, 2), flat[2 * n:])

    def episode_result(self) -> RunResult:
        """The finished run's per-job records and metrics (hidden truth: after the episode only)."""
        if self._cluster is None or self._request is not None:
            raise RuntimeError("episode_result() is available once the episode has terminated")
        return score(self.config, self._cluster.queue.popped, self._jobs, f"env:{self.control}",
                     self._seed)

    # ------------------------------------------------------------------ driving the cluster

    def _advance(self, continued: list[Job]) -> CheckRequest | ScheduleRequest | None:
        """Answer what the agent does not control until a request for the agent (or the end)."""
        cluster = self._cluster
        assert cluster is not None
        planner = self._planner
        while (request := cluster.next_decision(views=planner is None)) is not None:
            if isinstance(request, ScheduleRequest):
                if self.control == "full":
                    self._rows = TableObservation.rows(request.waiting, request.running,
                                                       self.encoder.max_jobs)  # type: ignore
                    return request
                if planner is not None:
                    cluster.answer_with_plan(planner)
                else:
                    cluster.answer_schedule(self.base.schedule(request.cluster, request.waiting,
                                                               request.running))
            elif self.control == "stop" and request.job.job_type in self.monitored:
                return request
            else:
                cluster.answer_check(CONTINUE)
                continued.append(self._jobs[request.job.job_id])
            self._ended += cluster.pop_finished()
        return None

    def _answer_check(self, action: Any, stopped: list[Job], continued: list[Job]) -> None:
        assert isinstance(self._request, CheckRequest) and self._cluster is not None
        job = self._jobs[self._request.job.job_id]
        stop = stop_action(action)
        self._renderer.decided(self._cluster.now, f"job {job.job_id} ({job.job_type}): "
                               + ("stop" if stop else "continue"))
        self._cluster.answer_check(AGENT_STOP if stop else CONTINUE)
        (stopped if stop else continued).append(job)
        self._ended += self._cluster.pop_finished()

    def _answer_schedule(self, action: Any, stopped: list[Job]) -> None:
        assert isinstance(self._request, ScheduleRequest) and self._cluster is not None
        n = self.encoder.max_jobs  # type: ignore[union-attr]
        act = full_action(action, n + 1)
        stops = [job for i, job in enumerate(self._rows)
                 if act[i] == 1 and job.state == "running"]
        pick_row = int(act[-1]) - 1
        pick = self._rows[pick_row] if 0 <= pick_row < len(self._rows) else None
        if pick is not None and pick.state == "running":
            pick = None
        self._cluster.answer_schedule(self._allocate(self._request, stops, pick))
        stopped.extend(self._jobs[j.job_id] for j in stops)
        for text in [f"job {j.job_id} ({j.job_type}): stop" for j in stops] + (
                [f"job {pick.job_id} ({pick.job_type}): start first"] if pick else []):
            self._renderer.decided(self._cluster.now, text)
        self._ended += self._cluster.pop_finished()

    def _allocate(self, request: ScheduleRequest, stops: list[SchedulerJobView],
                  pick: SchedulerJobView | None) -> Allocation:
        """The agent's stops and first pick, then the base scheduler on what is left."""
        stop_ids = {j.job_id for j in stops}
        free = request.cluster.free_gpus + sum(j.gpus for j in stops)
        running = [j for j in request.running if j.job_id not in stop_ids]
        waiting = list(request.waiting)
        first: list[int] = []
        if pick is not None and pick.gpus <= free:
            free -= pick.gpus
            waiting = [j for j in waiting if j.job_id != pick.job_id]
            running.append(pick)
            first = [pick.job_id]
        view = ClusterView(request.cluster.now, request.cluster.total_gpus, free,
                           len(waiting), len(running))
        alloc = self.base.schedule(view, tuple(waiting), tuple(running))
        preempt = () if first else tuple(j for j in alloc.preempt if j not in stop_ids)
        capacity = free + sum(self._jobs[j].gpus for j in preempt)
        starts = []
        for jid in alloc.start:  # keep the base's order; drop what would over-allocate
            if jid not in first and self._jobs[jid].gpus <= capacity:
                starts.append(jid)
                capacity -= self._jobs[jid].gpus
        return Allocation(start=(*first, *starts), preempt=preempt,
                          stop=tuple(j.job_id for j in stops))

    # ------------------------------------------------------------------ observation and info

    def _observe(self) -> Obs:
        request = self._request
        if request is None:
            return self.encoder.empty()
        if isinstance(request, CheckRequest):
            return self.encoder.encode(request.job, request.cluster)  # type: ignore[arg-type]
        return self.encoder.encode(self._rows, request.cluster)  # type: ignore[arg-type]

    def _info(self) -> dict[str, Any]:
        assert self._cluster is not None
        info: dict[str, Any] = {"time": self._cluster.now, "ended_jobs": tuple(self._ended)}
        self._ended = []
        if isinstance(self._request, CheckRequest):
            info.update(job_id=self._request.job.job_id, view=self._request.job,
                        cluster=self._request.cluster)
        info["action_mask"] = self._gym_mask()
        if self._request is None:
            info["metrics"] = self.episode_result().metrics
            info["reward_terms"] = self._meter.total._asdict()
        return info
