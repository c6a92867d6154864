"""Reward over-optimisation in miniature (Gao, Schulman & Hilton 2023): real RL against a proxy.

The world: `N_ACTIONS` candidate responses, each a feature vector, and a fixed gold reward on
them (a random two-layer network squashed to 0..1), both drawn once from `WORLD_SEED`. A proxy
reward model is fitted (ridge regression on random Fourier features) to a limited sample of
responses drawn from the starting policy, labelled with the gold reward plus noise. A policy
(softmax over responses, started from a fixed pretrained distribution) is then optimised with
REINFORCE against the proxy with a KL penalty to its start, r = proxy - kl_coef * log(pi / pi0).
At each of `N_EVALS` evals it logs the gold reward of an eval sample of responses drawn from the
policy (`eval_score`, noisy as a real eval), the policy's loss (`loss`), its exact expected
gold reward (`test_score`), its expected proxy reward and its exact KL to the start.
Runs vary the reward model's data size and label noise, the KL coefficient, the learning rate
and the seed. Hacking (gold peaks, then declines) is labelled afterwards from `test_score`
(`evalstop_gym.traces.corpus.label_runs`), not from these knobs.
Determinism as in `supervised`: one thread, deterministic algorithms, seeded generators.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .seeding import deterministic_torch

N_EVALS = 60
N_ACTIONS, N_FEATURES, N_RFF = 512, 8, 96
WORLD_SEED = 7
EVAL_SAMPLES = 64
BATCH = 64


class RewardRun(NamedTuple):
    """The settings of one run (all it needs to regenerate)."""

    run_id: str
    seed: int
    rm_samples: int       # responses the reward model is fitted on
    rm_noise: float       # sd of the noise on their gold labels
    kl_coef: float
    lr: float
    steps: int


def run_settings(n_runs: int = 48, seed: int = 2027) -> list[RewardRun]:
    """The corpus's runs: reward-model size x KL coefficient cells, the rest drawn."""
    rng = np.random.default_rng(seed)
    sizes, kls = (24, 64, 256, 2048), (0.0, 0.01, 0.05, 0.2)
    return [RewardRun(run_id=f"rew-{i:03d}", seed=2000 + i, rm_samples=sizes[i % 4],
                      rm_noise=float(rng.choice([0.05, 0.15])), kl_coef=kls[(i // 4) % 4],
                      lr=float(rng.choice([0.005, 0.01, 0.02])), steps=int(rng.choice([600, 900])))
            for i in range(n_runs)]


def world() -> dict[str, np.ndarray]:
    """Responses' features, their gold reward and the pretrained policy's logits (fixed)."""
    rng = np.random.default_rng(WORLD_SEED)
    x = rng.standard_normal((N_ACTIONS, N_FEATURES))
    w1, w2 = rng.standard_normal((N_FEATURES, 32)), rng.standard_normal(32)
    h = np.tanh(x @ w1 / np.sqrt(N_FEATURES)) @ w2 / np.sqrt(32)
    gold = 1.0 / (1.0 + np.exp(-2.0 * h))
    logits0 = 1.5 * rng.standard_normal(N_ACTIONS) - 1.0 * gold   # pretrained: mediocre
    return {"x": x, "gold": gold, "logits0": logits0}


def fit_proxy(run: RewardRun, w: dict[str, np.ndarray]) -> np.ndarray:
    """The reward model's score of every response: ridge on random Fourier features, fitted to
    `rm_samples` responses drawn from the starting policy with noisy gold labels."""
    rng = np.random.default_rng(run.seed)
    p0 = np.exp(w["logits0"] - w["logits0"].max())
    p0 /= p0.sum()
    seen = rng.choice(N_ACTIONS, size=run.rm_samples, p=p0)
    labels = w["gold"][seen] + run.rm_noise * rng.standard_normal(run.rm_samples)
    omega = rng.standard_normal((N_FEATURES, N_RFF)) / 1.0
    phase = rng.uniform(0, 2 * np.pi, N_RFF)
    feats = np.sqrt(2.0 / N_RFF) * np.cos(w["x"] @ omega + phase)
    a = feats[seen]
    coef = np.linalg.solve(a.T @ a + 1e-2 * np.eye(N_RFF), a.T @ (labels - labels.mean()))
    return feats @ coef + labels.mean()


def train_run(run: RewardRun) -> list[dict[str, object]]:
    """Optimise the policy against the proxy; one row per eval (replay CSV format + extras)."""
    import torch

    deterministic_torch(run.seed)
    w = world()
    proxy = torch.from_numpy(fit_proxy(run, w))
    gold = torch.from_numpy(w["gold"])
    logits0 = torch.from_numpy(w["logits0"])
    logp0 = torch.log_softmax(logits0, 0)
    theta = logits0.clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=run.lr)
    gen = torch.Generator().manual_seed(run.seed)
    every, rows, losses = run.steps // N_EVALS, [], []
    for step in range(1, run.steps + 1):
        logp = torch.log_softmax(theta, 0)
        acts = torch.multinomial(logp.detach().exp(), BATCH, replacement=True, generator=gen)
        reward = proxy[acts] - run.kl_coef * (logp[acts].detach() - logp0[acts])
        loss = -((reward - reward.mean()) * logp[acts]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % every == 0:
            rows.append(_row(run, step, theta.detach(), logp0, proxy, gold, gen,
                             float(np.mean(losses))))
            losses = []
    return rows


def _row(run: RewardRun, step: int, theta, logp0, proxy, gold, gen,
         policy_loss: float) -> dict[str, object]:
    import torch

    logp = torch.log_softmax(theta, 0)
    p = logp.exp()
    sample = torch.multinomial(p, EVAL_SAMPLES, replacement=True, generator=gen)
    return {"job_id": run.run_id, "step": step, "eval_score": float(gold[sample].mean()),
            "loss": policy_loss, "test_score": float((p * gold).sum()),
            "proxy_reward": float((p * proxy).sum()), "kl": float((p * (logp - logp0)).sum()),
            "family": "reward", "max_steps": run.steps}
