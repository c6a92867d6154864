"""One registration style, declared: every packaged base and detector registers its own names in
its module (`register_base`, `register_detector`, as a user's file does), and `registry.MODULES`
declares each module that does, so importing the package is enough for every name to resolve.

Checked in a fresh interpreter, where no test's import can stand in for a forgotten one.
"""

from __future__ import annotations

import json
import subprocess
import sys

from evalstop_gym.policies import make_base, registry
from evalstop_gym.policies.base import PriorityScheduler

NAMES = """
import importlib, json, pkgutil
import evalstop_gym.policies as package
from evalstop_gym.policies import registry

def names():
    return {"bases": {n: f.__module__ for n, f in registry.BASES.items()},
            "detectors": {n: f.__module__ for n, f in registry.DETECTORS.items()}}

before = names()
for module in pkgutil.iter_modules(package.__path__):
    importlib.import_module(f"evalstop_gym.policies.{module.name}")
print(json.dumps({"before": before, "after": names()}))
"""


def fresh_names() -> dict:
    done = subprocess.run([sys.executable, "-c", NAMES], capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_package_knows_every_name_its_modules_register() -> None:
    names = fresh_names()
    assert names["after"] == names["before"]
    assert {"FIFO", "SRTF-Est", "EvalSched-Strict", "LAS"} <= set(names["before"]["bases"])
    assert {"EvalStop", "StopAt", "LossPlateau", "BOCPD", "MaterialDecline"} <= set(
        names["before"]["detectors"])


def test_every_module_that_registers_a_name_is_declared() -> None:
    names = fresh_names()["after"]
    modules = {m.rpartition(".")[2] for table in names.values() for m in table.values()}
    assert modules <= set(registry.MODULES)
    assert set(registry.MODULES) <= modules        # and nothing is declared that registers none


def test_each_base_class_of_the_package_answers_to_its_name() -> None:
    def subclasses(cls: type) -> list[type]:
        return [c for s in cls.__subclasses__() for c in (s, *subclasses(s))]

    packaged = [c for c in subclasses(PriorityScheduler)
                if c.__module__.startswith("evalstop_gym.policies.") and "native_key" in vars(c)]
    assert len(packaged) >= 7
    for cls in packaged:
        assert type(make_base(cls.name)) is cls, cls.name
