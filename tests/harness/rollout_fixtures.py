"""Shared helpers of the rollout tests: an engine that plays a fixed script (not a test file)."""

from __future__ import annotations

from harness.engines import Engine, GenerationOutput


class ScriptedEngine(Engine):
    """Answers turn t with the t-th of ``turns`` (token ids, each of its one log-prob ``logprob``) for
    every prompt, and records every prompt it is given."""

    def __init__(self, turns, eos, logprob=-0.5):
        self.turns, self._eos, self.prompts, self.logprob = list(turns), list(eos), [], logprob

    def generate(self, prompts, params=None, overrides=None):
        self.prompts.append([list(p) for p in prompts])
        ids = self.turns.pop(0)
        return [GenerationOutput(list(ids), [self.logprob] * len(ids), "stop", ids[-1]) for _ in prompts]

    def score(self, *a, **k):
        raise NotImplementedError

    def update_weights(self, source):
        pass

    @property
    def eos_token_ids(self):
        return self._eos
