import gymnasium as gym

import evalstop_gym  # registers EvalStopCluster-v0
from evalstop_gym.env import HeuristicAgent

env = gym.make("EvalStopCluster-v0", config="e2", base_scheduler="SRTF-Est", control="stop")
agent = HeuristicAgent.from_name("EvalStop-2")  # a detector that reads one job
obs, info = env.reset(seed=42)
done = False
while not done:
    obs, reward, done, truncated, info = env.step(agent.act(obs, info))
direct = evalstop_gym.simulate("e2", "EvalStop-2+SRTF-Est", seed=42)
assert info["metrics"] == direct.metrics  # the env reproduces simulate exactly
print(info["metrics"]["jct"], info["metrics"]["wasted_frac"])
