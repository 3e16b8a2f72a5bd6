"""ACEBench (normal, special, agent; English and Chinese) as LOPD Gym environments.

Modules:

- :mod:`envs.acebench.data` — lazy, cached loading of the 2,040 entries through ``require_data``.
- :mod:`envs.acebench.decode` — ACEBench's output decoder (whitespace removal, ``ast``), FC decoding.
- :mod:`envs.acebench.expr_eval` — a restricted, size-guarded stand-in for upstream's ``eval`` of
  binary-operation argument values (we never ``eval`` model text).
- :mod:`envs.acebench.normal_checker` — the normal-category rules, quirks included.
- :mod:`envs.acebench.special_checker` — the special-category phrase checks.
- :mod:`envs.acebench.scenarios` — our own BaseApi, MessageApi, ReminderApi, FoodPlatform, Travel.
- :mod:`envs.acebench.executor` — runs agent messages against the scenario classes.
- :mod:`envs.acebench.agent_checker` — end-to-end and process accuracy.
- :mod:`envs.acebench.user_sim` — pluggable user simulators for agent multi-turn.
- :mod:`envs.acebench.scoring` — per-category accuracies and the official summary.
- :mod:`envs.acebench.env` — the Gymnasium environments.

Nothing here imports heavy packages; ``registration.py`` only names entry points.

Agreement with the official evaluator is measured in the same run by
``benchmarks/acebench_official_agreement.py`` (the official code reconstructed in a throwaway folder,
run as a subprocess, never imported here); results in ``benchmarks/RESULTS.md``.
"""
