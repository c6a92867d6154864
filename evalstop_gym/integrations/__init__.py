"""Thin adapters from training libraries (transformers, Lightning, Optuna, Ray Tune) to
RunMonitor; each imports its library lazily."""
