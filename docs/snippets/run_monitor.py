from evalstop_gym.online import RunMonitor

# The default detector; lower eval loss is better; 1200 steps, an eval every 100.
monitor = RunMonitor(mode="min", max_steps=1200)
eval_losses = [0.74, 0.65, 0.58, 0.53, 0.51, 0.50, 0.52, 0.55, 0.61, 0.68, 0.78, 0.90]
for step, eval_loss in zip(range(100, 1300, 100), eval_losses, strict=True):
    decision = monitor.update(step, eval_loss)  # after each eval
    if decision.stop:  # free the GPUs, keep the best checkpoint
        print(f"stop at step {decision.step}: {decision.reason}")
        print(f"keep the checkpoint of step {decision.best_step} (eval loss {decision.best_value})")
        break
