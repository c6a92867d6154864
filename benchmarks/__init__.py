"""The experiment matrix E1-E8: sweeps, statistics, tables, figures and the reproduction report."""
