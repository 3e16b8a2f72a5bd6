"""The one way to get a sandbox: :func:`make_sandbox` picks the backend a :class:`SandboxConfig` names.

It lives above :mod:`envs.sandbox.base` and both backends (each imports base), so no module of the
package imports one that imports it back.
"""

from __future__ import annotations

from envs.sandbox.base import Sandbox
from envs.sandbox.config import SandboxConfig


def make_sandbox(
    config: SandboxConfig | None = None, preload: tuple[str, ...] = (), programs: tuple[str, ...] = ()
) -> Sandbox:
    """The backend ``config.backend`` names. ``preload`` lists trusted modules worth importing once,
    ``programs`` trusted programs worth compiling once (the local backend does both in its fork
    server)."""
    config = config or SandboxConfig()
    # Each backend is imported when asked for: `import envs.sandbox` loads neither.
    if config.backend == "local":
        from envs.sandbox.local import LocalSandbox

        return LocalSandbox(config, preload=preload, programs=programs)
    if config.backend == "docker":
        from envs.sandbox.docker_backend import DockerSandbox

        return DockerSandbox(config, preload=preload, programs=programs)
    raise ValueError(f"unknown sandbox backend {config.backend!r}; use 'local' or 'docker'")
