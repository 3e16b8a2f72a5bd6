"""Our envs in other frameworks' training loops. :mod:`envs.integrations.trl`: TRL's ``GRPOTrainer``.

Nothing is imported here: each integration needs its framework, which is an optional dependency.
"""
