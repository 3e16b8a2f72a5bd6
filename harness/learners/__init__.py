"""Learners: one small module per algorithm behind :class:`harness.learners.base.Learner`.

========  ====================================================================================
``grpo``  G rollouts per task, group-normalised advantages, PPO clip (:mod:`.grpo`)
``opsd``  frozen teacher with an oracle trajectory in the system message, forward KL (:mod:`.opsd`)
``sdpo``  EMA teacher with successful siblings in context, top-k + tail reverse KL (:mod:`.sdpo`)
``lopd``  composer latents for the frozen teacher, margin + dual + anchor (:mod:`.lopd`)
``sft``   next-token NLL on demonstrations (:mod:`.sft`)
========  ====================================================================================
"""

from harness.learners.base import (
    LEARNERS, Learner, LearnerContext, Rollout, StepBatch, get_learner, register_learner,
)

__all__ = ["LEARNERS", "Learner", "LearnerContext", "Rollout", "StepBatch", "get_learner", "register_learner"]
