from envs.registry import register_env

register_env("lopd/evalplus-humaneval-v0", "envs.evalplus.env:EvalPlusEnv", dataset="humaneval")
register_env("lopd/evalplus-mbpp-v0", "envs.evalplus.env:EvalPlusEnv", dataset="mbpp")
