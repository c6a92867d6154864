"""Train a stop policy: the script form of `evalstop-bench train` (same options, same outputs).

    python -m evalstop_gym.benchmarks.train_stop_policy --algo ppo \
        --total-timesteps 120000 --out runs/ppo_stop

See `evalstop_gym.benchmarks.train` (or `evalstop-bench train --help`) for every option.
"""

from __future__ import annotations

import sys

from .train import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(sys.argv[1:]))
