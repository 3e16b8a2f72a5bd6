"""Register the 17 BFCL-v3 categories as ``lopd/bfcl-v3-<category>-v0`` (no heavy imports here).

``gym.make("lopd/bfcl-v3-simple-v0", fmt="prompt")`` selects the prompting format; FC is the default.
"""

from envs.registry import register_env

CATEGORIES = [
    "simple", "java", "javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
    "live_relevance", "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
    "multi_turn_long_context",
]


def env_id(category: str) -> str:
    return f"lopd/bfcl-v3-{category.replace('_', '-')}-v0"


for _cat in CATEGORIES:
    _cls = "BfclMultiTurnEnv" if _cat.startswith("multi_turn") else "BfclEnv"
    register_env(env_id(_cat), f"envs.bfcl.env:{_cls}", category=_cat)
