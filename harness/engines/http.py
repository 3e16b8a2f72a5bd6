"""The HTTP layer every server engine shares: JSON requests, retries, and errors that name the server.

::

    http = JSONClient("http://127.0.0.1:8000", server="vLLM", start_hint="make vllm; see docs/GPU.md")
    http.request("GET", "/health")                      # None (empty body), a dict, a list or text
    http.request("POST", "/v1/completions", {"model": "m", "prompt": [1, 2, 3], "max_tokens": 4})

A refused connection (the server is starting or restarting) or an HTTP 502/503/504 is retried with
exponential backoff; the request never reached a model then, so a retry cannot duplicate work. A
timeout is not retried. What finally fails raises :class:`ServerUnavailableError` (unreachable),
:class:`ServerFeatureError` (no such endpoint, 404/405) or :class:`EngineError` (any other HTTP error,
with the server's own message), each naming the server and its URL.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from harness.engines.base import EngineError


class ServerUnavailableError(EngineError):
    """The server could not be reached (refused, reset, timed out, or it answered 502/503/504)."""


class ServerFeatureError(EngineError):
    """The server lacks an endpoint or request field this call needs."""


_RETRY_HTTP = (502, 503, 504)


class JSONClient:
    """JSON over HTTP to one server. ``retries`` more attempts after a refused connection or a
    502/503/504, ``backoff`` seconds doubling each time; ``unavailable``/``feature`` are the error
    classes raised (an engine's own subclasses, so callers can catch either)."""

    def __init__(self, base_url: str, *, server: str, start_hint: str = "", timeout: float = 600.0,
                 api_key: str | None = None, retries: int = 3, backoff: float = 0.5,
                 unavailable: type[ServerUnavailableError] = ServerUnavailableError,
                 feature: type[ServerFeatureError] = ServerFeatureError):
        if not base_url.startswith(("http://", "https://")):
            raise EngineError(f"{server} URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.server, self.start_hint = server, start_hint
        self.timeout, self.api_key = float(timeout), api_key
        self.retries, self.backoff = int(retries), float(backoff)
        self.unavailable, self.feature = unavailable, feature

    def request(self, method: str, path: str, payload: Any = None, *, timeout: float | None = None,
                retries: int | None = None) -> Any:
        """One JSON request; the decoded answer (None for an empty body, text when not JSON)."""
        attempts = 1 + (self.retries if retries is None else int(retries))
        for attempt in range(attempts):
            try:
                return self._once(method, path, payload, timeout)
            except _Retry as e:
                if attempt + 1 == attempts:
                    raise self.unavailable(f"cannot reach the {self.server} server at {self.base_url} "
                                           f"({e.reason}; {attempts} attempts)"
                                           + (f"; {self.start_hint}" if self.start_hint else "")) from None
                time.sleep(self.backoff * 2 ** attempt)
        raise AssertionError("unreachable")

    def _once(self, method: str, path: str, payload: Any, timeout: float | None) -> Any:
        url = self.base_url + path
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout if timeout is None else timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:2000]
            if e.code in _RETRY_HTTP:
                raise _Retry(f"HTTP {e.code}: {detail[:200]}") from None
            if e.code in (404, 405):
                raise self.feature(f"the {self.server} server at {self.base_url} has no {method} {path} "
                                   f"(HTTP {e.code}); is it a {self.server} server, and which version?") from None
            raise HTTPStatusError(f"{self.server} {method} {path} at {self.base_url} failed with HTTP {e.code}: "
                                  f"{detail}", e.code, detail) from None
        except (TimeoutError, socket.timeout) as e:
            raise self.unavailable(f"the {self.server} server at {self.base_url} did not answer {method} {path} "
                                   f"within {timeout or self.timeout:.0f} s ({e})") from None
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            raise _Retry(str(getattr(e, "reason", e))) from None
        if not body:
            return None
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            return body.decode("utf-8", "replace")


class HTTPStatusError(EngineError):
    """An HTTP error answer other than 404/405 and 502-504: ``status`` and the server's ``detail``."""

    def __init__(self, message: str, status: int, detail: str):
        super().__init__(message)
        self.status, self.detail = status, detail


class _Retry(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
