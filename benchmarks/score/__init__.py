"""`evalstop-bench score`: a fixed, versioned suite every policy is scored on, normalised
(NoStop = 0, reference = 1) and aggregated as rliable recommends, and the leaderboard page."""
