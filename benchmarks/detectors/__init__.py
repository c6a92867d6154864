"""Detectors on real and simulated runs: which one to default to (`which_detector`), the Bayes
limit (`oracle`), and replaying real training logs through any detector (`replay`)."""
