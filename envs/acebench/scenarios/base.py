"""BaseApi: the phone's Wi-Fi switch and device login, shared by the phone apps.

Our own implementation of ACEBench's agent scenario class, written from the function docs in the
data and the final states stored in ``possible_answer``. Every phone app (MessageApi, ReminderApi,
FoodPlatform) derives from it, so each instance carries its own ``wifi``/``logged_in`` copy;
the executor calls ``turn_on_wifi``/``login_device`` on every instance that has them, which keeps
the copies in step, as upstream does.
"""

from __future__ import annotations

from typing import Any

Result = dict[str, Any]


class ScenarioBase:
    """Language-aware text lookup shared by all scenario classes."""

    TEXT: dict[str, dict[str, str]] = {}

    def __init__(self, language: str = "en"):
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        self._language = language

    def _t(self, key: str, **fmt: Any) -> str:
        table = self.TEXT.get(self._language) or self.TEXT["en"]
        return table[key].format(**fmt)

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        """Apply an ``initial_config`` section (upstream calls this twice: own section, then BaseApi's)."""


class BaseApi(ScenarioBase):
    """Wi-Fi and device login. Defaults: Wi-Fi off, device logged in."""

    TEXT = {
        "en": {"wifi_on": "Wi-Fi is now on", "logged_in": "The device is now logged in"},
        "zh": {"wifi_on": "wifi已打开", "logged_in": "设备已登录"},
    }

    def __init__(self, language: str = "en"):
        super().__init__(language)
        self.wifi = False
        self.logged_in = True

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        # A missing key resets to the default: the second call (BaseApi's section) wins.
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def _base_text(self, key: str) -> str:
        return BaseApi.TEXT[self._language][key]

    def turn_on_wifi(self) -> Result:
        """Turn on Wi-Fi."""
        self.wifi = True
        return {"status": True, "message": self._base_text("wifi_on")}

    def login_device(self) -> Result:
        """Log in to the device."""
        self.logged_in = True
        return {"status": True, "message": self._base_text("logged_in")}
