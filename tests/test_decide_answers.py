"""A detector whose `decide` answers something other than a StopDecision (None, 'stop', 1, True,
a tuple, a dict) fails in one line naming the detector and what decide must return, in process
as isolated, from the API as from the CLI."""

from __future__ import annotations

import textwrap

import pytest

from evalstop_gym.benchmarks import cli
from evalstop_gym.policies.composed import ComposedPolicy
from evalstop_gym.policies.srtf_est import SRTFEst
from evalstop_gym.sim.protocols import PolicyAnswerError
from evalstop_gym.simulate import simulate

GARBAGE = [None, "stop", 1, True, ("stop", "falling"), {"stop": True}]


class Garbage:
    """Answers `value` at every check."""

    milestones = ()

    def __init__(self, value):
        self.value, self.name = value, "Garbage"

    def decide(self, job, cluster):
        return self.value

    def on_job_end(self, job):
        pass

    def reset(self):
        pass


@pytest.mark.parametrize("value", GARBAGE, ids=repr)
@pytest.mark.parametrize("engine", [None, "python"])
def test_a_garbage_decision_in_process_is_one_line_naming_the_detector(small_config, value,
                                                                       engine):
    with pytest.raises(PolicyAnswerError) as caught:
        simulate(small_config, ComposedPolicy(Garbage(value), SRTFEst()), 1, engine)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"'Garbage': decide returned {value!r} ")
    assert "expected a StopDecision: CONTINUE, or stop('reason')" in message


def test_a_garbage_decision_from_a_users_file_is_one_line_on_the_cli(tmp_path, capsys):
    from evalstop_gym.config import CONFIG_DIR

    mine = tmp_path / "garbage.py"
    mine.write_text(textwrap.dedent('''
        class Garbage:
            milestones = ()
            name = "Garbage"

            def decide(self, job, cluster):
                return None

            def on_job_end(self, job):
                pass

            def reset(self):
                pass
        '''))
    exp = tmp_path / "tiny.yaml"
    exp.write_text(f"name: tiny\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 20, cluster.gpus: 16}\nseeds: [3]\n"
                   "cells:\n  - {base: SRTF-Est}\n")
    assert cli.main(["run", str(exp), "--out", str(tmp_path / "out"),
                     "--policy", f"{mine}:Garbage+SRTF-Est"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]   # after the progress bar
    assert last.startswith("evalstop-bench run: error: 'Garbage': decide returned None "
                           "(NoneType); expected a StopDecision")
