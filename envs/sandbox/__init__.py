"""Sandboxed execution of untrusted (model-written) Python: one interface, ``local`` and ``docker``
backends chosen by :class:`SandboxConfig`. See docs/SANDBOX.md.

>>> from envs.sandbox import make_sandbox
>>> with make_sandbox() as sb:                                     # doctest: +SKIP
...     sb.run("print(6 * 7)").stdout
b'42\\n'
"""

from envs.sandbox.base import ExecResult, Sandbox, SandboxUnavailable
from envs.sandbox.config import Limits, SandboxConfig
from envs.sandbox.factory import make_sandbox

__all__ = ["ExecResult", "Limits", "Sandbox", "SandboxConfig", "SandboxUnavailable", "make_sandbox"]
