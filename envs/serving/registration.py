import gymnasium as gym

# Registered with Gymnasium only, not as one of our envs (registered_ids): it is a client of an env
# served elsewhere, with no tasks of its own until a url is given, so check_env and the fuzz tests,
# which make every id with its defaults, have nothing to play.
if "lopd/remote-v0" not in gym.registry:
    gym.register(id="lopd/remote-v0", entry_point="envs.serving.remote:RemoteEnv")
