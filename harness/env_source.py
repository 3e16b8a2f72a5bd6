"""Where a run's envs come from: built in this process, or served elsewhere (``lopd serve``) and
played through ``lopd/remote-v0``. The trainer and the evaluator open envs only through here, so a
served env trains and evaluates exactly like the same env in-process::

    env_id, env = open_env(EnvConfig(id="lopd/shop-v0", url="http://envhost:8000"))
    more = [make_env(cfg.env, env_id) for _ in range(32)]   # one server session each
"""

from __future__ import annotations

from typing import Any

REMOTE_ID = "lopd/remote-v0"


def open_env(env: Any) -> tuple[str, Any]:
    """The resolved env id and a first env for an :class:`~harness.training.train_config.EnvConfig`;
    with ``env.url``, checks that the server serves ``env.id`` and that no ``kwargs`` are given here."""
    from envs.registry import make, resolve_env_id

    if not env.url:
        env_id = resolve_env_id(env.id)  # mypkg:lopd/x-v0 imports mypkg; entry points load
        return env_id, make(env_id, **env.kwargs)  # an unknown env.kwargs key: an error naming it
    if env.kwargs:
        raise ValueError(f"env.kwargs {sorted(env.kwargs)} with env.url: the server builds the env, so give "
                         f"them to `lopd serve {env.id} key=value ...` instead")
    first = remote(env.url)
    served = first.unwrapped.env_id
    if served != env.id:
        first.close()
        raise ValueError(f"env.url {env.url} serves {served!r}, but env.id is {env.id!r}; set env.id={served}")
    return served, first


def make_env(env: Any, env_id: str) -> Any:
    """Another env like the one :func:`open_env` gave (``env_id`` is what it returned)."""
    if env.url:
        return remote(env.url)
    from envs.registry import make

    return make(env_id, **env.kwargs)


def remote(url: str) -> Any:
    """``lopd/remote-v0`` at ``url``."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers lopd/remote-v0)

    return gym.make(REMOTE_ID, url=url)
