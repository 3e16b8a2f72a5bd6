from envs.registry import register_env

register_env("lopd/livecodebench-v0", "envs.livecodebench.env:LiveCodeBenchEnv")
