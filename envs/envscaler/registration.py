from envs.registry import register_env

# Every staged scenario (87 RL scenarios + the 2 fixture scenarios); pick one with
# reset(options={"task_id": "env_158_rl-task_1"}). Other record files: gym.make(id, envs=..., scenarios=...).
register_env("lopd/envscaler-v0", "envs.envscaler.env:EnvScalerEnv")
register_env("lopd/envscaler-fixture-v0", "envs.envscaler.env:EnvScalerFixtureEnv")
