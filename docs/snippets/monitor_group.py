from evalstop_gym.online import MonitorGroup

# A cross-run detector learns from the runs that ended before: give it a group.
group = MonitorGroup("MedianPruner", mode="max")
curves = [[0.2, 0.4, 0.6, 0.7, 0.8]] * 5 + [[0.2, 0.3, 0.3, 0.25, 0.2]]
for curve in curves:
    monitor = group.monitor(max_steps=len(curve))
    for step, score in enumerate(curve, start=1):
        if monitor.update(step, score).stop:
            print("stopped at step", step, ":", monitor.reason)
            break
    group.end_run(monitor)
