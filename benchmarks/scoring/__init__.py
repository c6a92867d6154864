"""The one way to score: tasks (an experiment with overrides) run through the sweep runner, the
per-run measures, and the runs that watch rather than stop (the oracle's). `score`, "Which
detector?" and `learned_seeds` are views of it."""
