from evalstop_gym.online import RunMonitor

# The default detector; lower eval loss is better, and the run has 400 steps.
monitor = RunMonitor(mode="min", max_steps=400)
for step, eval_loss in [(100, 0.9), (200, 0.7), (300, 0.8), (400, 0.85)]:
    decision = monitor.update(step, eval_loss)  # after each eval
    if decision.stop:  # free the GPUs, keep the best checkpoint
        print(decision.reason, "; best step", decision.best_step)
        break
