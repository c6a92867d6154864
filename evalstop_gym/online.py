"""RunMonitor: one real training run's evals in, a detector's stop decisions out.

The detector objects are the simulator's own (`evalstop_gym.policies`): each eval becomes a
`SchedulerJobView` built by `run_view` (the one place that decides what a real run's view holds)
and the detector's `decide` answers continue or stop, exactly as the reference `Cluster` asks it.

Cost. The view's histories are `HistoryWindow`s: read-only windows over append-only buffers, so a
view is built in O(1) however long the run. Detectors that only look at the tail (EvalStop-k,
LossPlateau, StopAt) or keep a running statistic through `HistoryWindow.fold` (Patience, CUSUM,
BOCPD: their noise scale is fixed along a run, see `policies/noise_estimate.py`) cost O(1) or
O(window) per update (BOCPD's window is its truncated run-length posterior, `bocpd.MAX_RUN`);
MedianPruner costs O(peers). DeclineTest re-tests the whole series at every eval, O(history)
per update by definition.

Progress is `step / max_steps` when `max_steps` is known; otherwise it is NaN ("unknown"), and
rules that read progress (StopAt-p, MedianPruner's warm-up and alignment) never act. A real run
is asked only at its evals, so StopAt-p acts at the first eval at or past p (the simulator also
asks at p itself when p falls between evals).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .sim.checkpoint import best_eval
from .sim.fall import fall_since_best
from .sim.protocols import Detector, capabilities
from .sim.view import ClusterView, SchedulerJobView
from .sim.workload import JOB_TYPES

log = logging.getLogger(__name__)
UNIT_RANGE = 1e150   # |eval| within [1 / UNIT_RANGE, UNIT_RANGE] (or 0): decisions unit-free

DEFAULT_DETECTOR: str = "MaterialDecline-0.02"
"""The detector RunMonitor and every integration use unless told otherwise (a registry name).

The one "Which detector?" (BEYOND.md) names: of the candidates that keep false stops of real
healthy runs (the public runs' design half, and the corpus's) and E2's FPR within budget at every
eval density, it stops the most real declines. It stops a run only for a fall of a tenth of what
the run gained, out of its noise. The paper's EvalStop-k stops healthy runs by chance once a run
has many evals."""

STATE_KEYS = ("detector", "mode", "job_type", "steps", "values", "losses")   # of state_dict()
RUN_CLUSTER = ClusterView(now=0.0, total_gpus=1, free_gpus=0, n_waiting=0, n_running=1)
MODES = ("max", "min")


class History:
    """An append-only buffer of floats; `window()` is a read-only view of what it holds now.

    Capacity doubles when full, so appends are amortised O(1). Entries are never rewritten, so
    a window taken earlier keeps showing the same values after later appends.
    """

    __slots__ = ("_data", "_n", "memo")

    def __init__(self, capacity: int = 16) -> None:
        self._data = np.empty(capacity)
        self._n = 0
        self.memo: dict[str, tuple[Hashable, int, Any]] = {}  # fold name -> (params, n, state)

    def append(self, value: float) -> None:
        if self._n == len(self._data):
            grown = np.empty(2 * len(self._data))
            grown[:self._n] = self._data
            self._data = grown
        self._data[self._n] = value
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def window(self) -> HistoryWindow:
        return HistoryWindow(self, self._data, self._n)


class HistoryWindow(Sequence[float]):
    """The first n entries of a `History`: a tuple-like, read-only sequence of floats.

    Indexing and `len` are O(1), a slice costs its length, `np.asarray` shares the buffer.
    `fold` lets a detector keep a running statistic: it resumes from where the last fold over
    the same buffer (with the same key) stopped, so each eval is folded once.
    """

    __slots__ = ("_source", "_data", "_n")

    def __init__(self, source: History, data: np.ndarray, n: int) -> None:
        self._source, self._data, self._n = source, data, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self._data[:self._n][index].tolist())
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("history index out of range")
        return float(self._data[i])

    def __iter__(self) -> Iterator[float]:
        return iter(self._data[:self._n].tolist())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        view = self._data[:self._n].view()
        view.flags.writeable = False
        if dtype is not None and np.dtype(dtype) != view.dtype:
            return view.astype(dtype)
        return view.copy() if copy else view

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (HistoryWindow, tuple, list)):
            return len(other) == self._n and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"HistoryWindow({tuple(self)!r})"

    def fold(self, name: str, params: Hashable, step: Callable[[Any, float], Any],
             init: Any) -> Any:
        """`step` folded over the window from `init`, resumed from the last fold of the same
        `name` over this buffer if it had the same `params` (`step` is a function of them).
        One state is kept per name: a fold with new params starts over and replaces it."""
        memo = self._source.memo
        last_params, done, state = memo.get(name, (params, 0, init))
        if last_params != params or done > self._n:   # other params, or an older window
            done, state = 0, init
        data = self._data
        for i in range(done, self._n):
            state = step(state, float(data[i]))
        memo[name] = (params, self._n, state)
        return state


class MonitorDecision(NamedTuple):
    """What the detector says after an eval; `best_*` is the checkpoint stop-and-save keeps
    (the best eval up to the stop, or so far)."""

    stop: bool
    reason: str
    step: float
    progress: float          # step / max_steps, NaN when max_steps is unknown
    best_step: float
    best_value: float        # in the metric's own units (not negated in "min" mode)
    n_evals: int


def run_view(job_id: int, job_type: str, state: str, progress: float, loss: float,
             eval_progress: Sequence[float], eval_scores: Sequence[float],
             loss_history: Sequence[float]) -> SchedulerJobView:
    """The view a detector gets of a real run: evals, losses and progress, nothing else known.

    A real run has no tenant, queue or GPU-time bookkeeping here, so those fields are neutral.
    """
    return SchedulerJobView(
        job_id=job_id, tenant=0, job_type=job_type, gpus=1, arrival_time=0.0, state=state,
        progress=progress, loss=loss, eval_progress=eval_progress,  # type: ignore[arg-type]
        eval_scores=eval_scores, loss_history=loss_history,  # type: ignore[arg-type]
        duration_estimate=0.0, attained_minutes=0.0, n_preemptions=0)


def resolve_detector(detector: str | Detector) -> Detector:
    """A detector object as given, or one made from its registered name ("EvalStop-2")."""
    if not isinstance(detector, str):
        if not callable(getattr(detector, "decide", None)):
            raise TypeError(f"detector={detector!r}: expected a detector name such as "
                            f"'EvalStop-2' or an object with decide(view, cluster)")
        return detector
    from .policies import make_detector

    made = make_detector(detector)
    if made is None:
        raise ValueError(f"detector={detector!r}: a monitor needs a detector, not 'none'")
    return made


def short_repr(value: Any) -> str:
    """repr, cut to one readable line (an int of 400 digits, say)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}...({len(text)} chars)"


def _number(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{name}={short_repr(value)}: expected a finite number")
    try:
        return float(value)
    except OverflowError:                    # an int beyond float range
        raise ValueError(f"{name}={short_repr(value)}: too large for a float; expected a finite "
                         f"number") from None


def _finite(value: Any, name: str) -> float:
    x = _number(value, name)
    if not math.isfinite(x):
        raise ValueError(f"{name}={short_repr(value)}: NaN and infinities cannot be judged; "
                         f"expected a finite number")
    return x


def _step(value: Any) -> float:
    """A finite step, kept an int when given as one (so `best_step` reads as the library's)."""
    x = _finite(value, "step")
    return int(value) if isinstance(value, (int, np.integer)) else x


def _check_options(mode: str, max_steps: Any, job_type: str, steps_name: str = "max_steps") -> None:
    if mode not in MODES:
        raise ValueError(f"mode={short_repr(mode)}: expected 'max' (higher is better) or 'min'")
    if max_steps is not None and (_finite(max_steps, steps_name) <= 0):
        raise ValueError(f"{steps_name}={max_steps!r}: expected a number > 0, or None if unknown")
    if not isinstance(job_type, str) or job_type not in JOB_TYPES:
        raise ValueError(f"job_type={short_repr(job_type)}: expected one of {', '.join(JOB_TYPES)}")


def check_monitor_args(detector: str | Detector, mode: str | None = None,
                       max_steps: Any = None, job_type: str = "rlhf",
                       steps_name: str = "max_steps") -> Detector:
    """The checks RunMonitor makes, for an integration to make at its own construction (where
    the arguments are known), not at the first eval; `mode` None: to be read later. Returns the
    detector object (made from its name). A detector with no rule for the run's `job_type` is
    refused in training-API words (it would never stop the run)."""
    _check_options("max" if mode is None else mode, max_steps, job_type, steps_name)
    made = resolve_detector(detector)
    covered = capabilities(made).types
    if job_type not in covered:
        raise ValueError(f"job_type={job_type!r}: {made.name} has no stopping rule for this kind "
                         f"of run, so it would never stop it; pass job_type= one of "
                         f"{', '.join(covered)} (the kind of training run), or another detector")
    return made


def never_acts_without_progress(detector: Detector) -> bool:
    """Whether `detector` can never stop a run whose length is unknown (progress NaN): a rule
    that reads progress alone (StopAt) or judges a run against its peers at the same progress
    (MedianPruner's warm-up and alignment). DeclineTest reads progress too but falls back to a
    schedule of its own without it."""
    caps = capabilities(detector)
    return "progress" in caps.needs and ("evals" not in caps.needs or caps.has_peers is not None)


class RunMonitor:
    """One run's evals in (`update`), the detector's decision out; see the module docstring.

    `grouped` is set by `MonitorGroup.monitor`: a detector that needs peers (`has_peers`, as
    MedianPruner) warns when used alone without enough of them, where it can never stop.

    `detector` is a registered name or a detector object (a `MonitorGroup` shares one object
    among its runs). In mode "min" the metric is negated before the detector sees it, as every
    detector reads higher as better. Once the detector says stop, the decision stays stop.
    """

    def __init__(self, detector: str | Detector = DEFAULT_DETECTOR, mode: str = "max",
                 max_steps: float | None = None, job_type: str = "rlhf", run_id: int = 0,
                 *, grouped: bool = False) -> None:
        _check_options(mode, max_steps, job_type)
        self.detector = resolve_detector(detector)
        self._caps = capabilities(self.detector)   # declared: read once (a protocol check is slow)
        has_peers = self._caps.has_peers
        if not grouped and has_peers is not None and not has_peers(job_type):
            log.warning("%s judges a run against ended peer runs; this RunMonitor has too few, "
                        "so it will never stop this run (use MonitorGroup)", self.detector.name)
        self.mode, self.max_steps, self.job_type, self.run_id = mode, max_steps, job_type, run_id
        self._sign = 1.0 if mode == "max" else -1.0
        if job_type not in self._caps.types:
            log.warning("%s does not monitor %s runs: it will never stop this one",
                        self.detector.name, job_type)
        self._warned: set[str] = set()      # kinds of skipped evals already warned about
        self._ended = False                 # set by MonitorGroup.end_run: no more evals
        self._clear()

    def _clear(self) -> None:
        self.steps: list[float] = []
        self._progress, self._scores, self._losses = History(), History(), History()
        self._loss_given: list[bool] = []
        self._best = -1
        self._stop_at: int | None = None
        self.reason = ""             # the stop in the metric's terms, then the detector's reason
        self.detector_reason = ""    # the detector's own words, as the simulator records them

    @property
    def stopped(self) -> bool:
        return self._stop_at is not None

    @property
    def stop_index(self) -> int | None:
        """Index of the eval at which the detector said stop (None: it has not)."""
        return self._stop_at

    def update(self, step: float, value: float, loss: float | None = None) -> MonitorDecision:
        """Record the eval `value` at `step` (with the training loss, if known) and decide."""
        self.record(step, value, loss)
        if self._stop_at is None:
            decision = self.detector.decide(self.view("running"), RUN_CLUSTER)
            if not isinstance(getattr(decision, "stop", None), (bool, np.bool_)):
                raise TypeError(f"detector {getattr(self.detector, 'name', self.detector)!r}: "
                                f"decide() returned {short_repr(decision)}; expected a "
                                f"StopDecision (CONTINUE or stop(reason)); the eval at step "
                                f"{step} is kept")
            if decision.stop:
                self._stop_at = len(self.steps) - 1
                self.detector_reason = decision.reason or "stopped"
                self.reason = self._stop_reason(self.detector_reason)
        return self.decision()

    def _stop_reason(self, because: str) -> str:
        """The stop in the metric's own terms (how far below its best, since which step, over
        how many evals, what share of the gain), then the detector's own reason."""
        scores = self._scores.window()
        fall = fall_since_best(scores)
        b, last = fall.best_at, len(scores) - 1
        share = (f", {fall.latest_drop / fall.gain:.0%} of what the run had gained"
                 if fall.gain > 0 else "")
        return (f"the eval is {fall.latest_drop:.4g} worse than its best "
                f"({self._sign * scores[b]:.6g} at step {self.steps[b]:g}) at step "
                f"{self.steps[-1]:g}, {last - b} evals after the best{share}; "
                f"{self.detector.name}: {because}")

    def offer(self, step: float, value: float, loss: float | None = None,
              decide: bool = True) -> MonitorDecision | None:
        """`update` (or `record`, with `decide=False`) for an eval a framework hands over as it
        comes, or None for one no detector can judge: a step not after the previous eval's (a
        second evaluate at the same step), a NaN or infinite value, a step past `max_steps`.
        A NaN or infinite loss is dropped (the eval is kept without it). Frameworks emit these
        in normal runs, so they are skipped rather than raised; each kind is logged once per
        monitor (at WARNING; repeats at DEBUG). Wrong types and negative steps still raise."""
        self._check_open()
        x = _step(step)
        skip = ""
        if self.steps and x <= self.steps[-1]:
            skip = "step"
            why = f"step={x:g} is not after the previous eval's step {self.steps[-1]:g}"
        elif not math.isfinite(_number(value, "value")):
            skip = "value"
            why = f"value={value!r} at step {x:g} is not finite"
        elif self.max_steps is not None and x > self.max_steps:
            skip = "max_steps"
            why = f"step={x:g} is past max_steps={self.max_steps:g}"
        if not skip and loss is not None and not math.isfinite(_number(loss, "loss")):
            self._skipped("loss", f"loss={loss!r} at step {x:g} is not finite; the eval is "
                                  f"kept without it")
            loss = None
        if skip:
            self._skipped(skip, f"{why}; skipped")
            return None
        if decide:
            return self.update(step, value, loss)
        self.record(step, value, loss)
        return self.decision()

    def _check_open(self) -> None:
        if self._ended:
            raise ValueError(f"update: run {self.run_id} was reported ended (MonitorGroup."
                             f"end_run), so it takes no more evals; make a new monitor with "
                             f"group.monitor()")

    def _skipped(self, kind: str, message: str) -> None:
        level = logging.DEBUG if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        log.log(level, "RunMonitor (%s, run %s): %s", self.detector.name, self.run_id, message)

    def record(self, step: float, value: float, loss: float | None = None) -> None:
        """Record an eval without asking the detector (a finished peer's log, say)."""
        self._check_open()
        step = _step(step)
        value = _finite(value, "value")
        if loss is not None:
            loss = _finite(loss, "loss")
        if step < 0 or (self.steps and step <= self.steps[-1]):
            raise ValueError(f"step={step:g}: steps must be >= 0 and increase (previous eval "
                             f"at step {self.steps[-1]:g})" if self.steps else
                             f"step={step:g}: expected a step >= 0")
        if self.max_steps is not None and step > self.max_steps:
            raise ValueError(f"step={step:g}: past max_steps={self.max_steps:g}")
        if value and not 1 / UNIT_RANGE <= abs(value) <= UNIT_RANGE and "units" not in self._warned:
            self._warned.add("units")   # squares and sums of such values overflow or vanish
            log.warning("value=%g: beyond 1e+-%g, where detectors no longer decide alike in any "
                        "units; rescale the metric (e.g. report it in other units)", value,
                        math.log10(UNIT_RANGE))
        self._append(step, value, loss)

    def _append(self, step: float, value: float, loss: float | None) -> None:
        score = self._sign * value
        self.steps.append(step)
        self._progress.append(self.progress_at(step))
        self._scores.append(score)
        self._loss_given.append(loss is not None)
        if loss is not None:
            self._losses.append(loss)
        if self._stop_at is None:   # the checkpoint kept: the best eval up to the stop
            self._best = best_eval(self._scores.window(), len(self.steps) - 1, self._best)

    def progress_at(self, step: float) -> float:
        """`step / max_steps`, or NaN when the run's length is unknown."""
        return step / self.max_steps if self.max_steps is not None else math.nan

    def view(self, state: str = "running") -> SchedulerJobView:
        """What the detector sees now (the latest eval's progress and loss)."""
        losses = self._losses.window()
        progress = self._progress.window()
        return run_view(self.run_id, self.job_type, state, progress[-1] if progress else 0.0,
                        losses[-1] if losses else math.nan, progress, self._scores.window(),
                        losses)

    def decision(self) -> MonitorDecision:
        """The decision after the latest eval (stop stays stop)."""
        if not self.steps:
            raise ValueError("RunMonitor.decision: no eval yet; call update(step, value) first")
        best = self._best
        return MonitorDecision(self._stop_at is not None, self.reason, self.steps[-1],
                               self._progress.window()[-1], self.steps[best],
                               self._sign * self._scores.window()[best], len(self.steps))

    def cannot_act(self) -> str:
        """Why the detector cannot act on this run as logged ('' if it can)."""
        det = self.detector
        can = self._caps
        if self.job_type not in can.types:
            return f"{det.name} does not monitor {self.job_type} runs"
        needs = can.needs
        if "loss" in needs and not len(self._losses):
            return f"{det.name} needs the training loss; none was given"
        if "progress" in needs and self.max_steps is None:
            return f"{det.name} needs progress; max_steps is unknown"
        if can.has_peers is not None and not can.has_peers(self.job_type):
            return f"{det.name} judges a run against ended peer runs; too few have ended"
        return ""

    def final_view(self, completed: bool | None = None) -> SchedulerJobView:
        """The run as it ended: 'stopped' if the detector stopped it (or `completed=False`)."""
        if completed is None:
            completed = self._stop_at is None
        return self.view("completed" if completed else "stopped")

    def state_dict(self) -> dict[str, Any]:
        """Plain data to resume from: the options and every eval seen (in metric units)."""
        scores = self._scores.window()
        losses = iter(self._losses.window())
        return {"detector": self.detector.name, "mode": self.mode, "max_steps": self.max_steps,
                "job_type": self.job_type, "steps": list(self.steps),
                "values": [self._sign * s for s in scores],
                "losses": [next(losses) if given else None for given in self._loss_given]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Rebuild from `state_dict()`'s output by replaying its evals (no patience reset).

        Atomic: the state is checked and replayed into a fresh copy, which replaces this
        monitor's history only once every eval has been accepted; a malformed state raises a
        one-line ValueError naming its key and leaves this monitor as it was."""
        if not isinstance(state, Mapping):
            raise ValueError(f"load_state_dict: state={short_repr(state)}: expected the dict "
                             f"state_dict() returns")
        for key in STATE_KEYS:
            if key not in state:
                raise ValueError(f"load_state_dict: state[{key!r}] is missing; expected the "
                                 f"keys {', '.join(STATE_KEYS)}")
        mine = {"detector": self.detector.name, "mode": self.mode, "job_type": self.job_type}
        for key, value in mine.items():
            if state[key] != value:
                raise ValueError(f"load_state_dict: {key}={short_repr(state[key])} does not match "
                                 f"this monitor's {value!r}")
        columns = [state[key] for key in ("steps", "values", "losses")]
        for key, column in zip(("steps", "values", "losses"), columns, strict=True):
            if not isinstance(column, (list, tuple)):
                raise ValueError(f"load_state_dict: state[{key!r}]={short_repr(column)}: "
                                 f"expected a list (one entry per eval)")
        if len({len(c) for c in columns}) > 1:
            raise ValueError(f"load_state_dict: state['steps'], ['values'], ['losses'] hold "
                             f"{', '.join(str(len(c)) for c in columns)} entries; expected one "
                             f"each per eval")
        max_steps = self.max_steps if self.max_steps is not None else state.get("max_steps")
        try:                                   # a length given to this monitor wins
            _check_options(self.mode, max_steps, self.job_type)
        except ValueError as exc:
            raise ValueError(f"load_state_dict: state['max_steps']: {exc}") from None
        fresh = copy.copy(self)
        fresh.max_steps = max_steps
        fresh._clear()
        for i, (step, value, loss) in enumerate(zip(*columns, strict=True)):
            try:
                fresh.update(step, value, loss)
            except ValueError as exc:
                raise ValueError(f"load_state_dict: eval {i} of state['steps'/'values'/'losses']"
                                 f": {exc}") from None
        self.__dict__.update(fresh.__dict__)


class MonitorGroup:
    """Runs judged by one shared detector, so that cross-run detectors learn from their peers.

    It pools only the runs made with `monitor()` and learns from a run only when told that it
    ended (`end_run`), in the order told: MedianPruner's peers and the pooled noise estimate of
    CUSUM and BOCPD come from those runs and no others. The default is `DEFAULT_DETECTOR`, as
    RunMonitor's (it judges each run alone, so a group changes nothing for it); name a cross-run
    detector ("MedianPruner", "CUSUM") to pool. A run reported ended takes no more evals.
    """

    def __init__(self, detector: str | Detector = DEFAULT_DETECTOR, mode: str = "max",
                 job_type: str = "rlhf") -> None:
        _check_options(mode, None, job_type)
        self.detector = resolve_detector(detector)
        self.mode, self.job_type = mode, job_type
        self._runs = 0
        self._ended: set[int] = set()

    def monitor(self, max_steps: float | None = None, mode: str | None = None,
                job_type: str | None = None) -> RunMonitor:
        """A monitor for one more run of the group, sharing the group's detector. `mode`, if
        given, must be the group's: its runs are pooled, so they share one direction."""
        if mode is not None and mode != self.mode:
            raise ValueError(f"mode={mode!r}: this group's runs are {self.mode!r}; a group pools "
                             f"its runs, so they share one direction (make another group)")
        self._runs += 1
        return RunMonitor(self.detector, self.mode, max_steps, job_type or self.job_type,
                          run_id=self._runs - 1, grouped=True)

    def end_run(self, monitor: RunMonitor, completed: bool | None = None) -> None:
        """Report that `monitor`'s run ended; a run the detector did not stop counts as
        completed unless `completed=False` (it crashed, or something else stopped it)."""
        if monitor.detector is not self.detector:
            raise ValueError("end_run: that monitor was not made by this group's monitor()")
        if monitor.run_id in self._ended:
            raise ValueError(f"end_run: run {monitor.run_id} was already reported as ended")
        self._ended.add(monitor.run_id)
        monitor._ended = True
        if monitor.steps:
            self.detector.on_job_end(monitor.final_view(completed))
