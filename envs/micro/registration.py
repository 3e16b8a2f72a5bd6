from envs.registry import register_env

# The procedurally generated micro world (docs/MICRO.md); built and cached on first use.
# gym.make("lopd/micro-v0", seed=0, n_train=600, n_eval=120, split="train")
register_env("lopd/micro-v0", "envs.micro.env:MicroEnv")
