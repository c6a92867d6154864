"""Private seeds: workloads an untrusted policy cannot recompute, look up or read back.

The simulator is deterministic and installed where the policy runs, so a policy that knows a
run's seed (or guesses it from the arrival times it sees) regenerates the jobs, labels included.
A private run draws its workload from `SeedSecret.workload_seed(seed)` instead, an HMAC of the
published seed under a secret the policy's process never receives (`isolation.IsolatedPolicy`
with `sandbox=True`); the run records only the secret's fingerprint. What else a private run
refuses or seals, and what it cannot prevent, is in `evalstop_gym.isolation`'s docstring.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from .config import ConfigError, SimConfig

log = logging.getLogger(__name__)

SECRET_ENV = "EVALSTOP_SEED_SECRET"            # the secret itself (any string)
SECRET_FILE_ENV = "EVALSTOP_SEED_SECRET_FILE"  # or a file holding it (readable by you alone)
_FRESH: list[bytes] = []   # this process's random secret, when none is configured
_WARNED: set[str] = set()


class SeedSecret:
    """The salt that turns a published seed into a private workload seed.

    Held by the trusted side only (the sweep's parent and workers), never sent to the policy's
    process; its repr and the run's records show only a fingerprint. The same secret and seed
    always give the same workload, so a run is reproducible by whoever holds the secret.
    """

    __slots__ = ("_key",)

    def __init__(self, key: bytes | str) -> None:
        self._key = key.encode() if isinstance(key, str) else bytes(key)
        if not self._key:
            raise ValueError(f"the seed secret is empty: set {SECRET_ENV} (or "
                             f"{SECRET_FILE_ENV}) to a long random string")

    @classmethod
    def load(cls) -> SeedSecret:
        """From $EVALSTOP_SEED_SECRET, else the file $EVALSTOP_SEED_SECRET_FILE names, else a
        random secret made once per process (private, but not reproducible). Both set is a
        ValueError (which secret a run used must not hang on a precedence rule); a key file
        other users can read (the policy's `nobody` among them) is warned about."""
        if os.environ.get(SECRET_ENV) and os.environ.get(SECRET_FILE_ENV):
            raise ValueError(f"both {SECRET_ENV} and {SECRET_FILE_ENV} are set; unset one, so "
                             f"that the secret the runs use is the one you meant")
        if os.environ.get(SECRET_ENV):
            return cls(os.environ[SECRET_ENV].strip())
        if os.environ.get(SECRET_FILE_ENV):
            path = Path(os.environ[SECRET_FILE_ENV])
            try:
                secret = cls(path.read_bytes().strip())
            except OSError as exc:
                raise ValueError(f"{SECRET_FILE_ENV}={str(path)!r}: cannot read the seed secret "
                                 f"({exc.strerror})") from None
            if os.name == "posix" and path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
                warn_once(f"private seeds: the key file {path} is readable by other users (a "
                          f"policy run as one of them can read the secret); chmod 600 it")
            return secret
        if not _FRESH:
            _FRESH.append(secrets.token_bytes(32))
            log.warning("private seeds: no %s or %s, so a random secret for this process "
                        "(runs are private but cannot be reproduced)", SECRET_ENV,
                        SECRET_FILE_ENV)
        return cls(_FRESH[0])

    def workload_seed(self, seed: int) -> int:
        """The 128-bit seed the workload of published `seed` is drawn from."""
        digest = hmac.new(self._key, b"evalstop workload seed %d" % seed, hashlib.sha256)
        return int.from_bytes(digest.digest()[:16], "big")

    @property
    def fingerprint(self) -> str:
        """Names the secret in records (which runs shared one) without revealing it."""
        return hmac.new(self._key, b"evalstop fingerprint", hashlib.sha256).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"SeedSecret(fingerprint={self.fingerprint!r})"


def warn_once(message: str) -> None:
    """A sweep makes many runs; one warning per process says it."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def readable_by_others(path: Path) -> bool:
    """Whether a user with no other rights can read `path` (every folder above it searchable)."""
    try:
        if not path.stat().st_mode & stat.S_IROTH:
            return False
        return all(folder.stat().st_mode & stat.S_IXOTH for folder in path.resolve().parents)
    except OSError:
        return False


def check_private_config(config: SimConfig) -> None:
    """Refuses what private seeds cannot hide: corpus curves with their recorded evals, which a
    policy finds (with the run's label) in the package's copy of the corpus. Added noise hides
    the values, not the runs: a few noisy evals matched against a readable corpus still guess
    labels better than chance, hence the warning."""
    if config.curves.source != "corpus":
        return
    if config.curves.corpus_noise != "added":
        raise ConfigError(f"curves.corpus_noise={config.curves.corpus_noise!r} with private "
                          f"seeds: a policy can match a job's evals against the shipped corpus "
                          f"and read its label; set curves.corpus_noise=added")
    from .traces.corpus import corpus_file

    if readable_by_others(corpus_file(config.curves.corpus_rlhf)):
        warn_once(f"private seeds: the corpus ({corpus_file('reward').parent}) is readable "
                  f"by every user, so a policy can still match a job's noisy evals against its "
                  f"runs; make it readable by you alone for a leaderboard")


def seal_output(out: Path) -> None:
    """Make `out` readable by its owner alone, so a policy that dropped privileges cannot read
    earlier runs' files (their labels) there."""
    if os.name == "posix":
        out.mkdir(parents=True, exist_ok=True)
        out.chmod(0o700)
