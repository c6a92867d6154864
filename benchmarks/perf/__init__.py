"""Speed, measured in one run as ratios: the engines (`engine`, PERFORMANCE.md), the live monitor
and replay (`online`), the env's steps per second (`env_throughput`), the matrix's wall time."""
