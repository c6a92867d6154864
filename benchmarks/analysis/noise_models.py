"""The noise models BEYOND.md compares detectors under, in the order and by the names its tables
and figures give them, and the false-positive bar every rule there is judged by."""

from __future__ import annotations

NOISE_MODELS = ("gaussian", "student_t", "ar1", "drift")
NOISE_NAMES = {"gaussian": "Gaussian", "student_t": "Student-t (df 3)", "ar1": "AR(1) rho 0.5",
               "drift": "drift fitted to public runs"}
FPR_BAR = 0.05   # a rule that stops more than this share of healthy RLHF jobs is not usable
