from evalstop_gym.online import MonitorGroup

# Runs of one sweep share a group: the default detector, and ended runs of the same kind lend
# their noise to later ones.
group = MonitorGroup(mode="max")
rising = [0.20, 0.35, 0.46, 0.55, 0.61, 0.66, 0.69, 0.71, 0.72, 0.73, 0.735, 0.74]
turning = [0.20, 0.36, 0.47, 0.55, 0.60, 0.61, 0.58, 0.54, 0.49, 0.45, 0.41, 0.37]
for curve in [rising] * 3 + [turning]:
    monitor = group.monitor(max_steps=len(curve))
    for step, score in enumerate(curve, start=1):
        if monitor.update(step, score).stop:
            print("stopped at step", step, ":", monitor.reason)
            break
    group.end_run(monitor)
