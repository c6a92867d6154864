"""`evalstop-bench list`: the experiments this installation knows, with their titles."""

from __future__ import annotations

import argparse

from evalstop_gym.experiment import list_experiments, load_experiment


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def main(args: argparse.Namespace) -> int:
    for name in list_experiments():
        print(f"{name:6s} {load_experiment(name).title}")
    return 0
