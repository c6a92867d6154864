"""The discrete-event simulator core. Knows nothing of Gymnasium, pandas or plotting."""
