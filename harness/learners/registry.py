"""Learner names: ``learner=<name>`` in a train config resolves here to a class, imported on use, so a
registry lookup imports no learner it does not need (and the config types import no learner module)::

    register_learner("mine", "my_package.mine:MyLearner")   # then `lopd train ... learner=mine`
"""

from __future__ import annotations

import importlib
from typing import Any

LEARNERS: dict[str, str] = {
    "grpo": "harness.learners.grpo:GRPOLearner",
    "opsd": "harness.learners.opsd:OPSDLearner",
    "sdpo": "harness.learners.sdpo:SDPOLearner",
    "lopd": "harness.learners.lopd:LOPDLearner",
    "sft": "harness.learners.sft:SFTLearner",
}
"""Learner name -> ``module:Class`` (imported on use)."""



def register_learner(name: str, entry_point: str) -> None:
    """Make ``learner=<name>`` resolve to ``entry_point`` (``"package.module:Class"``)."""
    if ":" not in entry_point:
        raise ValueError(f"entry point {entry_point!r} is not 'module:Class'")
    LEARNERS[name] = entry_point



def get_learner(name: str) -> type[Any]:
    """The learner class registered under ``name``, or at ``name`` = ``"package.module:Class"``."""
    if name not in LEARNERS and ":" not in name:
        raise KeyError(f"unknown learner {name!r}; known: {', '.join(sorted(LEARNERS))} (or 'module:Class')")
    module, cls = LEARNERS.get(name, name).split(":")
    return getattr(importlib.import_module(module), cls)



def learner_config_type(section: str, learner: str | None = None) -> type | None:
    """The ``Config`` of the learner whose section is named ``section``: a registered learner, or
    ``learner`` (the run's, possibly ``module:Class``) when that is its name. None: no such section."""
    if section in LEARNERS:
        return get_learner(section).Config
    if learner and ":" in learner and get_learner(learner).name == section:
        return get_learner(learner).Config
    return None
