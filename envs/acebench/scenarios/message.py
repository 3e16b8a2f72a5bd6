"""MessageApi: an SMS inbox of six users with a capacity of six messages.

Behaviour derived from the data (function docs and stored final states): message ids count up
from 6; a sent message has no ``time`` field (so finding the latest/earliest message afterwards
fails on it, as upstream does); sending needs the device logged in, Wi-Fi on, a free slot and two
known users, checked in that order; deleting needs a login and a known id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from envs.acebench.scenarios.base import BaseApi, Result

USERS = {
    "Eve": ("USR100", "123-456-7890", "Software Engineer"),
    "Frank": ("USR101", "234-567-8901", "Data Scientist"),
    "Grace": ("USR102", "345-678-9012", "Product Manager"),
    "Helen": ("USR103", "456-789-0123", "UX Designer"),
    "Isaac": ("USR104", "567-890-1234", "DevOps Engineer"),
    "Jack": ("USR105", "678-901-2345", "Marketing Specialist"),
}

# (sender, receiver, date, text in en, text in zh); the zh inbox translates messages 2 and 3 only.
INBOX = [
    (
        "USR100",
        "USR101",
        "2024-06-09",
        "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in Conference Room 1.",
        None,
    ),
    (
        "USR101",
        "USR102",
        "2024-03-09",
        'Can you help me order a "Margherita Pizza" delivery? The merchant is Domino\'s.',
        '你能帮我点一个"玛格丽特披萨"的外卖吗,商家是达美乐。',
    ),
    (
        "USR102",
        "USR103",
        "2023-12-05",
        "Please check the milk tea delivery options available from Heytea and purchase a cheaper milk tea "
        "for "
        'me. After making the purchase, remember to reply to me with "Already bought."',
        "帮我查一些喜茶有哪些奶茶外卖，买一杯便宜些的奶茶。买完以后记得回复我,回复的内容是（已经买好了）",
    ),
    ("USR103", "USR102", "2024-09-09", "No problem Helen, I can assist you.", None),
    ("USR104", "USR105", "2024-06-06", "Isaac, are you available for a call?", None),
    ("USR105", "USR104", "2024-01-15", "Yes Jack, let's do it in 30 minutes.", None),
]


class MessageApi(BaseApi):
    """Send, view, search and delete text messages."""

    TEXT = {
        "en": {
            "not_logged_in": "The device is not logged in; cannot {action}.",
            "wifi_off": "Wi-Fi is off; messages cannot be sent right now.",
            "full": "The inbox is full. Ask the user which message to delete.",
            "unknown_pair": "The sender or the receiver does not exist.",
            "sent": "Message sent to {receiver}.",
            "no_id": "No message has this ID.",
            "deleted": "Message {id} was deleted.",
            "no_sender": "The sender does not exist.",
            "no_receiver": "The receiver does not exist.",
            "none_between": "No messages found between these users.",
            "no_user": "The user does not exist.",
            "no_match": "No message contains this keyword.",
            "empty": "The inbox is empty.",
            "latest": "The latest message ID is {id}",
            "earliest": "The earliest message ID is {id}",
        },
        "zh": {
            "not_logged_in": "设备未登录，无法{action}。",
            "wifi_off": "wifi已关闭，现在无法发送短信。",
            "full": "短信容量已满，请询问用户删除哪一条短信。",
            "unknown_pair": "发送者或接收者不存在。",
            "sent": "短信已发送给{receiver}。",
            "no_id": "不存在该ID的短信。",
            "deleted": "短信{id}已删除。",
            "no_sender": "发送者不存在。",
            "no_receiver": "接收者不存在。",
            "none_between": "没有找到这两位用户之间的短信。",
            "no_user": "用户不存在。",
            "no_match": "没有包含该关键词的短信。",
            "empty": "短信记录为空。",
            "latest": "最新的短信ID是 {id}",
            "earliest": "最早的短信ID是 {id}",
        },
    }
    ACTIONS = {
        "en": {
            "send": "send messages",
            "delete": "delete messages",
            "view": "view messages",
            "times": "list message times",
            "latest": "get the latest message ID",
            "earliest": "get the earliest message ID",
        },
        "zh": {
            "send": "发送短信",
            "delete": "删除短信",
            "view": "查看短信",
            "times": "获取短信时间",
            "latest": "获取最新短信ID",
            "earliest": "获取最早短信ID",
        },
    }

    def __init__(self, language: str = "en"):
        super().__init__(language)
        self.max_capacity = 6
        self.user_list = {
            name: {"user_id": uid, "phone_number": phone, "occupation": job}
            for name, (uid, phone, job) in USERS.items()
        }
        self.inbox: dict[int, dict[str, Any]] = {}
        for i, (sender, receiver, date, en, zh) in enumerate(INBOX, 1):
            text = zh if language == "zh" and zh else en
            self.inbox[i] = {"sender_id": sender, "receiver_id": receiver, "message": text, "time": date}
        self.message_id_counter = len(INBOX)

    def _denied(self, action: str) -> Result:
        return {
            "status": False,
            "message": self._t("not_logged_in", action=self.ACTIONS[self._language][action]),
        }

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> Result:
        """Send a message from one user to another."""
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("send")
        if self.wifi == False:  # noqa: E712
            return {"status": False, "message": self._t("wifi_off")}
        if len(self.inbox) >= self.max_capacity:
            return {"status": False, "message": self._t("full")}
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return {"status": False, "message": self._t("unknown_pair")}
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {
            "sender_id": self.user_list[sender_name]["user_id"],
            "receiver_id": self.user_list[receiver_name]["user_id"],
            "message": message,
        }
        return {"status": True, "message": self._t("sent", receiver=receiver_name)}

    def delete_message(self, message_id: int) -> Result:
        """Delete a message by its ID."""
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("delete")
        if message_id not in self.inbox:
            return {"status": False, "message": self._t("no_id")}
        del self.inbox[message_id]
        return {"status": True, "message": self._t("deleted", id=message_id)}

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> Result:
        """All messages sent from one user to another."""
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("view")
        if sender_name not in self.user_list:
            return {"status": False, "message": self._t("no_sender")}
        if receiver_name not in self.user_list:
            return {"status": False, "message": self._t("no_receiver")}
        sid = self.user_list[sender_name]["user_id"]
        rid = self.user_list[receiver_name]["user_id"]
        found = [
            {"id": i, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
            for i, m in self.inbox.items()
            if m["sender_id"] == sid and m["receiver_id"] == rid
        ]
        if not found:
            return {"status": False, "message": self._t("none_between")}
        return {"status": True, "messages": found}

    def search_messages(self, user_name: str, keyword: str) -> Result:
        """Messages sent or received by a user that contain a keyword (case-insensitive)."""
        if user_name not in self.user_list:
            return {"status": False, "message": self._t("no_user")}
        uid = self.user_list[user_name]["user_id"]
        found = [
            {"id": i, "sender_id": m["sender_id"], "receiver_id": m["receiver_id"], "message": m["message"]}
            for i, m in self.inbox.items()
            if uid in (m["sender_id"], m["receiver_id"]) and keyword.lower() in m["message"].lower()
        ]
        if not found:
            return {"status": False, "message": self._t("no_match")}
        return {"status": True, "messages": found}

    def get_all_message_times_with_ids(self) -> dict[Any, Any]:
        """Every message ID with its date."""
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("times")
        return {i: m["time"] for i, m in self.inbox.items()}

    def _extreme_message_id(self, latest: bool) -> Result:
        if self.logged_in == False:  # noqa: E712 (upstream compares with ==)
            return self._denied("latest" if latest else "earliest")
        if not self.inbox:
            return {"status": False, "message": self._t("empty")}
        best_id, best_time = None, None
        for i, m in self.inbox.items():
            t = datetime.strptime(m["time"], "%Y-%m-%d")  # a sent message has no time: KeyError
            if best_time is None or (t > best_time if latest else t < best_time):
                best_id, best_time = i, t
        key = "latest" if latest else "earliest"
        return {"status": True, "message": self._t(key, id=best_id), "message_id": best_id}

    def get_latest_message_id(self) -> Result:
        """ID of the most recent message (by date; the first one wins ties)."""
        return self._extreme_message_id(latest=True)

    def get_earliest_message_id(self) -> Result:
        """ID of the oldest message (by date; the first one wins ties)."""
        return self._extreme_message_id(latest=False)
