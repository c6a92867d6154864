"""Running experiments: the sweep engine and its cache (`runner`), one experiment end to end
(`pipeline`), the `run` and `list` commands, the calibration search and the cached re-run check."""
