"""Shop: customers, products, orders. Orders are drafts until confirmed."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, first_data, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, rows, table, task


class ShopSystem:
    """An online shop with customers, a product catalogue and orders."""

    def __init__(self, init_config: dict):
        self.customers: dict = {}
        self.products: dict = {}
        self.orders: dict = {}
        self.next_order_no: int = 1
        self.init_config = init_config

    def find_customer(self, customer: str) -> dict:
        """Find a customer by full name, with their orders.

        Args:
            customer: The customer's full name.
        """
        found = []
        for c in self.customers.values():
            if c["name"] == customer:
                orders = [
                    {
                        "order_id": o["order_id"],
                        "product": self.products[o["product_id"]]["name"],
                        "status": o["status"],
                    }
                    for o in self.orders.values()
                    if o["customer_id"] == c["customer_id"]
                ]
                found.append({"customer_id": c["customer_id"], "name": c["name"], "orders": orders})
        if not found:
            return {"success": False, "error": f"no customer named {customer}"}
        return {"success": True, "data": found}

    def search_products(self, query: str) -> dict:
        """List products whose name contains the query.

        Args:
            query: Part of a product name.
        """
        hits = [dict(p) for p in self.products.values() if query.lower() in p["name"].lower()]
        if not hits:
            return {"success": False, "error": f"no product matches {query}"}
        return {"success": True, "data": hits}

    def create_order(self, customer_id: str, product_id: str, quantity: int) -> dict:
        """Create an order (as a draft).

        Args:
            customer_id: The customer's id.
            product_id: The product's id.
            quantity: How many items.
        """
        if customer_id not in self.customers:
            return {"success": False, "error": f"unknown customer {customer_id}"}
        if product_id not in self.products:
            return {"success": False, "error": f"unknown product {product_id}"}
        if quantity < 1 or quantity > self.products[product_id]["stock"]:
            return {"success": False, "error": "invalid quantity"}
        oid = f"O{self.next_order_no}"
        self.next_order_no += 1
        self.orders[oid] = {
            "order_id": oid,
            "customer_id": customer_id,
            "product_id": product_id,
            "quantity": quantity,
            "status": "draft",
        }
        return {"success": True, "data": {"order_id": oid, "status": "draft"}}

    def confirm_order(self, order_id: str) -> dict:
        """Confirm a draft order; its items leave the stock.

        Args:
            order_id: The order's id.
        """
        o = self.orders.get(order_id)
        if o is None or o["status"] != "draft":
            return {"success": False, "error": f"no draft order {order_id}"}
        self.products[o["product_id"]]["stock"] -= o["quantity"]
        o["status"] = "confirmed"
        return {"success": True, "data": {"order_id": order_id, "status": "confirmed"}}

    def cancel_order(self, order_id: str) -> dict:
        """Cancel an order; confirmed items go back to stock.

        Args:
            order_id: The order's id.
        """
        o = self.orders.get(order_id)
        if o is None or o["status"] == "cancelled":
            return {"success": False, "error": f"no open order {order_id}"}
        if o["status"] == "confirmed":
            self.products[o["product_id"]]["stock"] += o["quantity"]
        o["status"] = "cancelled"
        return {"success": True, "data": {"order_id": order_id, "status": "cancelled"}}

    def quick_buy(self, product_name: str, quantity: int) -> dict:
        """Buy a product at once as a guest checkout.

        Args:
            product_name: The exact product name.
            quantity: How many items.
        """
        for p in self.products.values():
            if p["name"] == product_name and 1 <= quantity <= p["stock"]:
                oid = f"O{self.next_order_no}"
                self.next_order_no += 1
                p["stock"] -= quantity
                self.orders[oid] = {
                    "order_id": oid,
                    "customer_id": "GUEST",
                    "product_id": p["product_id"],
                    "quantity": quantity,
                    "status": "confirmed",
                }
                return {"success": True, "data": {"order_id": oid, "status": "confirmed"}}
        return {"success": False, "error": "cannot buy that"}


PRODUCTS = (
    "oak desk",
    "desk lamp",
    "wool scarf",
    "steel kettle",
    "tea set",
    "yoga mat",
    "road bike",
    "bike helmet",
    "rain jacket",
    "trail shoes",
    "phone case",
    "usb cable",
    "coffee grinder",
    "linen shirt",
    "garden hose",
    "paint brush",
    "camp stove",
    "sleeping bag",
    "book stand",
    "wall clock",
    "table fan",
    "ice tray",
    "wine rack",
    "bath towel",
    "chess set",
    "kite",
    "water bottle",
    "hand mixer",
    "rug",
    "pillow",
)


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 4)
    prods = v.sample("product", rng, 5)
    cids, pids = new_ids(rng, "C", 4), new_ids(rng, "P", 5)
    products = {
        p: {"product_id": p, "name": n, "price": rng.randint(5, 300), "stock": rng.randint(5, 20)}
        for p, n in zip(pids, prods, strict=True)
    }
    cfg = {
        "customers": table("customer_id", cids, name=names),
        "products": products,
        "orders": {},
        "next_order_no": rng.randint(100, 900),
    }
    if first_template(rng):
        return _order_task(rng, cfg, cids[0], pids[0])
    return _cancel_task(rng, cfg, cids[0], pids[:2])


def _order_task(rng: random.Random, cfg: dict[str, Any], cid: str, pid: str) -> TaskSpec:
    """The customer orders a product: create, then confirm."""
    who, product = cfg["customers"][cid]["name"], cfg["products"][pid]["name"]
    stock = cfg["products"][pid]["stock"]
    qty = rng.randint(1, 4)
    mine = rows("orders", customer_id=cid, product_id=pid)
    checks = [
        check(f"{who} has an order of {product}", f"return len({mine}) > 0"),
        check(f"The order is for {qty} items", f"return any(o['quantity'] == {qty} for o in {mine})"),
        check("The order is confirmed", f"return any(o['status'] == 'confirmed' for o in {mine})"),
        check(f"{qty} {product} left the stock", f"return {cell('products', pid, 'stock')} == {stock - qty}"),
    ]
    texts = (
        "Place an order of {quantity} x {product} for customer {customer}.",
        "{customer} wants to buy {quantity} {product}. Order it for them.",
    )
    return task(rng, "order", texts, cfg, checks, {"customer": who, "product": product, "quantity": qty})


def _cancel_task(rng: random.Random, cfg: dict[str, Any], cid: str, pids: list[str]) -> TaskSpec:
    """The customer has two confirmed orders (of ``pids``); the first must be cancelled."""
    who, product = cfg["customers"][cid]["name"], cfg["products"][pids[0]]["name"]
    target, keep = f"O{cfg['next_order_no'] - 2}", f"O{cfg['next_order_no'] - 1}"
    cfg["orders"] = {
        o: {
            "order_id": o,
            "customer_id": cid,
            "product_id": p,
            "quantity": rng.randint(1, 3),
            "status": "confirmed",
        }
        for o, p in zip((target, keep), pids, strict=True)
    }
    stock = cfg["products"][pids[0]]["stock"] + cfg["orders"][target]["quantity"]
    checks = [
        check(
            f"{who}'s {product} order is cancelled",
            f"return {cell('orders', target, 'status')} == 'cancelled'",
        ),
        check(
            "Only that order was cancelled and its items are back in stock",
            f"return {cell('orders', keep, 'status')} == 'confirmed' and "
            f"{cell('products', pids[0], 'stock')} == {stock}",
        ),
    ]
    texts = (
        "Cancel {customer}'s order of {product}.",
        "{customer} no longer wants the {product} they ordered; cancel that order.",
    )
    return task(rng, "cancel", texts, cfg, checks, {"customer": who, "product": product})


def solve(p: dict[str, Any], mistake: str | None = None):
    r = yield "find_customer", {"customer": p["customer"]}
    cust = first_data(r)
    if "quantity" not in p:  # cancel
        wanted = [o for o in cust["orders"] if (o["product"] == p["product"]) != (mistake == "wrong_order")]
        if mistake == "stop_early":
            return
        yield "cancel_order", {"order_id": wanted[0]["order_id"]}
        return
    if mistake == "quick_buy":
        yield "quick_buy", {"product_name": p["product"], "quantity": p["quantity"]}
        return
    r = yield "search_products", {"query": p["product"]}
    prod = next(x for x in r["data"] if x["name"] == p["product"])
    if mistake == "stop_early":
        return
    r = yield (
        "create_order",
        {"customer_id": cust["customer_id"], "product_id": prod["product_id"], "quantity": p["quantity"]},
    )
    if mistake == "skip_confirm":
        return
    yield "confirm_order", {"order_id": r["data"]["order_id"]}


DOMAIN = Domain(
    name="shop",
    env_class=ShopSystem,
    make_task=make_task,
    solve=solve,
    summary="An online shop with customers, products and orders.",
    introduction="This environment is an online shop. It keeps customers, a product catalogue with stock "
    "levels, and orders placed for customers.",
    rules=("Every order belongs to a registered customer.", "An order cannot exceed the product's stock."),
    vocab={"product": PRODUCTS},
    mistakes={"order": ("skip_confirm", "quick_buy", "stop_early"), "cancel": ("wrong_order", "stop_early")},
    distractors=("quick_buy",),
    expert_success=0.2,
    operations=operation_types(ShopSystem, "create_order", "confirm_order", "cancel_order", "quick_buy"),
)
