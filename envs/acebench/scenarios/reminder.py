"""ReminderApi: up to six reminders, three of them preset.

From the stored final states: a new reminder gets the next id counting from 3 (the preset ones
carry ids 1001-1003 in the record but sit under keys 1-3), ``notified`` starts false and ``time``
is stored as given. ``search_reminders`` formats each match's time with ``strftime`` although
times are stored as strings, so upstream fails whenever something matches; we keep that.
Upstream's copies of this class differ between versions (its English multi-turn copy lacks
``search_reminders`` and ``mark_as_notified``, so a call falls through to the unknown-function
path); ours offers both in both languages, as the function docs in the data list them. Neither
changes any saved state.
"""

from __future__ import annotations

from typing import Any

from envs.acebench.scenarios.base import BaseApi, Result

TODO_TEXT = {
    "en": 'First, help Frank place a food delivery order at "Hema Fresh," ordering two "Fresh Gift Packs." '
    'Then, send a message to Frank saying, "The price of the purchased goods is () yuan." Replace the '
    "parentheses with the actual amount, keeping one decimal place.",
    "zh": '首先帮Frank在"盒马生鲜"点外卖，需要定两个"生鲜大礼包"，再发短信告诉Frank：'
    '"购买商品的价格是()元"。要把括号换成实际金额，保留一位小数。',
}


class ReminderApi(BaseApi):
    """Add, view, search, mark and delete reminders."""

    TEXT = {
        "en": {
            "not_logged_in": "The device is not logged in; cannot {action}.",
            "not_found": "No reminder is titled '{title}'.",
            "full": "The reminders are full; no new reminder can be added.",
            "added": "Reminder '{title}' added.",
            "no_id": "No reminder has this ID.",
            "deleted": "Reminder {id} was deleted.",
            "none": "There are no reminders.",
            "notified": "Reminder {id} is marked as notified.",
            "no_match": "No reminder contains this keyword.",
        },
        "zh": {
            "not_logged_in": "设备未登录，无法{action}。",
            "not_found": "没有标题为'{title}'的提醒。",
            "full": "提醒容量已满，无法添加新的提醒。",
            "added": "提醒'{title}'已添加。",
            "no_id": "不存在该ID的提醒。",
            "deleted": "提醒{id}已删除。",
            "none": "没有任何提醒。",
            "notified": "提醒{id}已标记为已通知。",
            "no_match": "没有包含该关键词的提醒。",
        },
    }
    ACTIONS = {
        "en": {"view": "view reminders", "add": "add a reminder", "delete": "delete reminders"},
        "zh": {"view": "查看提醒", "add": "添加提醒", "delete": "删除提醒"},
    }

    def __init__(self, language: str = "en"):
        super().__init__(language)
        self.max_capacity = 6
        preset = [
            ("Doctor's Appointment", "Visit Dr. Smith for a checkup.", "2024-07-15 09:30"),
            ("Team Meeting", "Monthly project review with the team.", "2024-07-17 11:00"),
            ("To-do list", TODO_TEXT[language], "2024-07-16 11:00"),
        ]
        self.reminder_list: dict[int, dict[str, Any]] = {
            i: {"reminder_id": 1000 + i, "title": t, "description": d, "time": when, "notified": False}
            for i, (t, d, when) in enumerate(preset, 1)
        }
        self.reminder_id_counter = len(preset)

    def _denied(self, action: str) -> Result:
        return {
            "status": False,
            "message": self._t("not_logged_in", action=self.ACTIONS[self._language][action]),
        }

    def view_reminder_by_title(self, title: str) -> Result:
        """The first reminder with exactly this title."""
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("view")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return {"status": False, "message": self._t("not_found", title=title)}

    def add_reminder(self, title: str, description: str, time: Any) -> Result:
        """Add a reminder (refused when six already exist)."""
        if self.logged_in == False:  # noqa: E712
            return self._denied("add")
        if len(self.reminder_list) >= self.max_capacity:
            return {"status": False, "message": self._t("full")}
        self.reminder_id_counter += 1
        rid = self.reminder_id_counter
        self.reminder_list[rid] = {
            "reminder_id": rid,
            "title": title,
            "description": description,
            "time": time,
            "notified": False,
        }
        return {"status": True, "message": self._t("added", title=title)}

    def delete_reminder(self, reminder_id: int) -> Result:
        """Delete a reminder by its key."""
        if self.logged_in == False:  # noqa: E712
            return self._denied("delete")
        if reminder_id not in self.reminder_list:
            return {"status": False, "message": self._t("no_id")}
        del self.reminder_list[reminder_id]
        return {"status": True, "message": self._t("deleted", id=reminder_id)}

    def view_all_reminders(self) -> Result:
        """Every reminder's title, description, time and notified flag."""
        if not self.reminder_list:
            return {"status": False, "message": self._t("none")}
        return {
            "status": True,
            "reminders": [
                {k: r[k] for k in ("title", "description", "time", "notified")}
                for r in self.reminder_list.values()
            ],
        }

    def mark_as_notified(self, reminder_id: int) -> Result:
        """Mark a reminder as notified."""
        if reminder_id not in self.reminder_list:
            return {"status": False, "message": self._t("no_id")}
        self.reminder_list[reminder_id]["notified"] = True
        return {"status": True, "message": self._t("notified", id=reminder_id)}

    def search_reminders(self, keyword: str) -> Result:
        """Reminders whose title or description contains the keyword (case-insensitive)."""
        found = []
        for r in self.reminder_list.values():
            if keyword.lower() in r["title"].lower() or keyword.lower() in r["description"].lower():
                # upstream: r["time"].strftime(...) on a string time -> AttributeError
                found.append(
                    {
                        "title": r["title"],
                        "description": r["description"],
                        "time": r["time"].strftime("%Y-%m-%d %H:%M"),
                    }
                )
        if not found:
            return {"status": False, "message": self._t("no_match")}
        return {"status": True, "reminders": found}
