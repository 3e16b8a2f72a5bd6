"""FoodPlatform: six users with balances, six merchants with two dishes each, delivery orders.

From the data: logging in needs Wi-Fi, a known user and the right password, once per user; an order
needs the user logged in, a known merchant, a positive int quantity (default 1) and exact product
names; its ``total_price`` is a float and is deducted from the balance. Upstream's English class
refuses an order only when it costs more than the balance, its Chinese class also when it costs
exactly the balance (``>=``); both are kept. ``_load_scenario`` resets the logged-in list.
"""

from __future__ import annotations

from typing import Any

from envs.acebench.scenarios.base import BaseApi, Result

ACCOUNTS = [
    ("Eve", "U100", "password123", 500.0),
    ("Frank", "U101", "password456", 300.0),
    ("Grace", "U102", "password789", 150.0),
    ("Helen", "U103", "password321", 800.0),
    ("Isaac", "U104", "password654", 400.0),
    ("Jack", "U105", "password654", 120.0),
]

# (en name, zh name, service type, [(en product, zh product, price), ...])
MERCHANTS = [
    (
        "Domino's",
        "达美乐",
        "Pizza",
        [("Margherita Pizza", "玛格丽特披萨", 68.0), ("Super Supreme Pizza", "超级至尊披萨", 88.0)],
    ),
    (
        "Rice Village Bibimbap",
        "米村拌饭",
        "Bibimbap",
        [("Stone Pot Bibimbap", "石锅拌饭", 35.0), ("Korean Beef Bibimbap", "韩式牛肉拌饭", 45.0)],
    ),
    ("Haidilao", "海底捞", "Hotpot", [("Beef Rolls", "牛肉卷", 68.0), ("Seafood Platter", "海鲜拼盘", 88.0)]),
    (
        "Heytea",
        "喜茶",
        "Milk Tea",
        [("Cheese Milk Tea", "芝士奶茶", 25.0), ("Four Seasons Spring Milk Tea", "四季春奶茶", 22.0)],
    ),
    (
        "Hema Fresh",
        "盒马生鲜",
        "Fresh Grocery",
        [("Organic Vegetable Pack", "有机蔬菜包", 15.0), ("Fresh Gift Pack", "生鲜大礼包", 99.0)],
    ),
    (
        "Jiutian BBQ",
        "九田家烤肉",
        "BBQ",
        [("Korean Grilled Beef", "韩式烤牛肉", 128.0), ("Grilled Pork Belly", "烤五花肉", 78.0)],
    ),
]


class FoodPlatform(BaseApi):
    """Log in, browse menus, place delivery orders, check balances and orders."""

    TEXT = {
        "en": {
            "wifi_off": "Wi-Fi is off; cannot log in.",
            "no_user": "The user does not exist.",
            "bad_password": "Wrong password.",
            "already": "{user} is already logged in.",
            "logged_in": "{user} logged in.",
            "nobody": "Nobody is logged in to the food platform.",
            "not_logged_in": "{user} is not logged in to the food platform.",
            "no_merchant": "The merchant does not exist.",
            "bad_quantity": "Invalid quantity {quantity} for {product}.",
            "no_product": "{merchant} has no product {product}.",
            "poor": "The balance is too low for this order.",
            "ordered": "Order placed with {merchant}. Total: {total} yuan",
            "unknown_merchant": "Merchant '{merchant}' does not exist.",
            "no_orders": "The user has no orders.",
            "no_match": "No order matches.",
        },
        "zh": {
            "wifi_off": "wifi未打开，无法登录。",
            "no_user": "用户不存在。",
            "bad_password": "密码错误。",
            "already": "{user}已经登录。",
            "logged_in": "用户{user}登录成功。",
            "nobody": "当前没有用户登录外卖平台。",
            "not_logged_in": "用户{user}未登录外卖平台。",
            "no_merchant": "商家不存在。",
            "bad_quantity": "商品{product}的数量{quantity}无效。",
            "no_product": "{merchant}没有商品{product}。",
            "poor": "余额不足，无法下单。",
            "ordered": "已在{merchant}下单，总金额为{total}元",
            "unknown_merchant": "商家'{merchant}'不存在。",
            "no_orders": "该用户没有订单。",
            "no_match": "没有匹配的订单。",
        },
    }

    def __init__(self, language: str = "en"):
        super().__init__(language)
        zh = language == "zh"
        self.users = {
            name: {"user_id": uid, "password": pw, "balance": bal} for name, uid, pw, bal in ACCOUNTS
        }
        self.merchant_list = {
            (zh_name if zh else en_name): {
                "merchant_id": f"M{100 + i}",
                "service_type": service,
                "menu": [{"product": zp if zh else ep, "price": price} for ep, zp, price in menu],
            }
            for i, (en_name, zh_name, service, menu) in enumerate(MERCHANTS)
        }
        self.logged_in_users: list[str] = []
        self.orders: list[dict[str, Any]] = []

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        super()._load_scenario(scenario, long_context)
        self.logged_in_users = scenario.get("logged_in_users", [])

    def login_food_platform(self, username: str, password: str) -> Result:
        """Log a user in to the food platform."""
        if self.wifi == False:  # noqa: E712 (upstream compares with ==)
            return {"status": False, "message": self._t("wifi_off")}
        if username not in self.users:
            return {"status": False, "message": self._t("no_user")}
        if self.users[username]["password"] != password:
            return {"status": False, "message": self._t("bad_password")}
        if username in self.logged_in_users:
            return {"status": False, "message": self._t("already", user=username)}
        self.logged_in_users.append(username)
        return {"status": True, "message": self._t("logged_in", user=username)}

    def view_logged_in_users(self) -> Result:
        """Users currently logged in to the platform."""
        if not self.logged_in_users:
            return {"status": False, "message": self._t("nobody")}
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name: str) -> float:
        """A user's balance (0.0 for an unknown user)."""
        return self.users[user_name]["balance"] if user_name in self.users else 0.0

    def add_food_delivery_order(self, username: str, merchant_name: str, items: list) -> Result:
        """Order items ``[{'product': name, 'quantity': n}]`` from one merchant."""
        if username not in self.logged_in_users:
            return {"status": False, "message": self._t("not_logged_in", user=username)}
        if merchant_name not in self.merchant_list:
            return {"status": False, "message": self._t("no_merchant")}
        total = 0.0
        lines = []
        for item in items:
            product = item.get("product")
            quantity = item.get("quantity", 1)
            if not isinstance(quantity, int) or quantity <= 0:
                return {
                    "status": False,
                    "message": self._t("bad_quantity", quantity=quantity, product=product),
                }
            dish = next(
                (d for d in self.merchant_list[merchant_name]["menu"] if d["product"] == product), None
            )
            if dish is None:
                return {
                    "status": False,
                    "message": self._t("no_product", merchant=merchant_name, product=product),
                }
            total += dish["price"] * quantity
            lines.append({"product": product, "quantity": quantity, "price_per_unit": dish["price"]})
        balance = self.users[username]["balance"]
        if (total >= balance) if self._language == "zh" else (total > balance):
            return {"status": False, "message": self._t("poor")}
        self.users[username]["balance"] -= total
        self.orders.append(
            {"user_name": username, "merchant_name": merchant_name, "items": lines, "total_price": total}
        )
        return {"status": True, "message": self._t("ordered", merchant=merchant_name, total=total)}

    def get_products(self, merchant_name: str) -> Any:
        """A merchant's menu."""
        merchant = self.merchant_list.get(merchant_name)
        if merchant:
            return merchant["menu"]
        return {"status": False, "message": self._t("unknown_merchant", merchant=merchant_name)}

    def view_orders(self, user_name: str) -> Result:
        """All orders of a user."""
        mine = [o for o in self.orders if o["user_name"] == user_name]
        if not mine:
            return {"status": False, "message": self._t("no_orders")}
        return {"status": True, "orders": mine}

    def search_orders(self, keyword: str) -> Result:
        """Orders whose merchant or product names contain the keyword (case-insensitive)."""
        k = keyword.lower()
        if self._language == "zh":  # upstream's Chinese class calls .lower() on the item dicts
            found = [
                o
                for o in self.orders
                if k in o["merchant_name"].lower() or any(k in item.lower() for item in o.get("items", []))
            ]
        else:
            found = [
                o
                for o in self.orders
                if k in o["merchant_name"].lower()
                or any(k in item["product"].lower() for item in o.get("items", []))
            ]
        if not found:
            return {"status": False, "message": self._t("no_match")}
        return {"status": True, "orders": found}
