"""Register the ACEBench environments (string entry points only; nothing heavy is imported).

Ids: ``lopd/acebench-{normal,special,agent}-{en,zh}-v0``. Keyword arguments of ``gym.make``:
``categories`` (a subset of the family's categories), ``format`` ("prompt" or "fc"), and for agent
envs ``user_simulator`` / ``user_generate``.
"""

from envs.registry import register_env

_CLASSES = {"normal": "AceBenchNormalEnv", "special": "AceBenchSpecialEnv", "agent": "AceBenchAgentEnv"}

for _family, _cls in _CLASSES.items():
    for _lang in ("en", "zh"):
        register_env(f"lopd/acebench-{_family}-{_lang}-v0", f"envs.acebench.env:{_cls}", language=_lang)
