"""EnvScaler: LLM-synthesised stateful environments with checklist rewards, run with the authors' rules.

- :mod:`envs.envscaler.records`: load env metadata and scenarios (JSON, JSONL, parquet, folders).
- :mod:`envs.envscaler.runtime`: exec env class code, apply init_config, state snapshots, check functions.
- :mod:`envs.envscaler.parse`: one action per response, the authors' parse rules.
- :mod:`envs.envscaler.env`: the Gymnasium env (``lopd/envscaler-v0``, ``lopd/envscaler-fixture-v0``).
- :mod:`envs.envscaler.metrics`: mean reward, full-pass rate, mean steps.
"""

from envs.envscaler.env import EnvScalerEnv, EnvScalerFixtureEnv
from envs.envscaler.metrics import summarize
from envs.envscaler.parse import Action, parse_action
from envs.envscaler.records import RecordError, load_envs, load_scenarios, read_records
from envs.envscaler.runtime import EnvClassError, new_instance, score_checklist, state_of

__all__ = [
    "Action",
    "EnvClassError",
    "EnvScalerEnv",
    "EnvScalerFixtureEnv",
    "RecordError",
    "load_envs",
    "load_scenarios",
    "new_instance",
    "parse_action",
    "read_records",
    "score_checklist",
    "state_of",
    "summarize",
]
