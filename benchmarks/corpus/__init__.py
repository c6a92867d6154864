"""Generators of the real-curve corpus: one file per family, regenerable bit for bit from seeds."""
