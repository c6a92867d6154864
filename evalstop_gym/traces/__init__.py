"""Real data in: job arrivals from a public cluster trace, eval curves from users' training logs."""
