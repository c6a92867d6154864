"""The experiments and everything around them, grouped by what a user asks for.

- `cli`: `evalstop-bench` (parser and dispatch; `usage` holds the argument checks commands share,
  `durable` the atomic outputs).
- `catalog`: every experiment in one place: its report, claims, figures, calibration role.
- `sweep`: running experiments (`runner` with its cache, `pipeline`, the `run` and `list`
  commands, the calibration search).
- `analysis`: statistics, the paper's claims and verdicts, tables and figures.
- `report`: REPRODUCTION.md, BEYOND.md and the learned policies' section.
- `detectors`: which detector to default to, the Bayes limit, replaying real logs.
- `rl`: training SB3 agents on the env. `perf`: speed, measured as ratios in one run.
- `corpus`: building and scoring the real-curve corpus.

Each floor imports only floors below it (pyproject.toml's import contracts, checked in CI).
"""
