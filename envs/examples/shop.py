"""Worked example: a stateful tool-use env with 3 tools and a checklist reward."""
from typing import Annotated

from envs import Task, ToolEnv, checklist_reward, tool

PRICES = {"apple": 2, "pear": 3, "milk": 4}


class Shop:
    def __init__(self):
        self.cart, self.paid = {}, 0

    @tool
    def price(self, item: Annotated[str, "Item name, e.g. 'apple'"]) -> int:
        """Look up the price of an item."""
        return PRICES[item]

    @tool
    def add_to_cart(self, item: Annotated[str, "Item name"], qty: Annotated[int, "How many"] = 1) -> dict:
        """Put items in the cart; returns the cart."""
        self.cart[item] = self.cart.get(item, 0) + qty
        return self.cart

    @tool
    def checkout(self) -> int:
        """Pay for the cart; returns the total paid (fails on unknown items)."""
        self.paid = sum(PRICES[i] * q for i, q in self.cart.items())
        return self.paid


class ShopEnv(ToolEnv):
    def load_tasks(self):
        return [Task("apples", "Buy 2 apples, then pay.", data={"want": {"apple": 2}}),
                Task("mix", "Buy a pear and a milk, then pay.", split="eval", data={"want": {"pear": 1, "milk": 1}})]

    def setup(self, task):
        return Shop()  # its @tool methods become this episode's tools

    def verify(self, task, shop):
        return checklist_reward([shop.cart == task.data["want"], shop.paid > 0])
