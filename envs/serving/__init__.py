"""Our envs served to other processes and trainers: ``lopd serve`` (an OpenEnv server,
:mod:`envs.serving.openenv_server`) and its client ``lopd/remote-v0`` (:mod:`envs.serving.remote`).

Nothing is imported here: the server module needs OpenEnv, which lives in its own venv.
"""
