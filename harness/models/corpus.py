"""A small built-in corpus for training the tiny model's tokenizer (and smoke-training the model).

It mixes the text a tool-use episode is made of: English instructions, the Qwen3 tools system
prompt, ``<tool_call>`` JSON, tool responses and short reasoning. Generated deterministically
from templates, so the tokenizer built from it is the same on every machine.
"""

from __future__ import annotations

import json
import random

from envs.protocol import render_tool_call, render_tools_system_prompt, wrap_tool_response

_ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "You are a helpful assistant that can use tools to answer the user.",
    "Please look up the order status and tell me when it will arrive.",
    "I would like to book a flight from Paris to Berlin next Monday.",
    "Find the cheapest hotel near the station and reserve two nights.",
    "The function returned an error because the argument was missing.",
    "Let me check the price first, then add the items to the cart.",
    "Write a Python function that returns the sum of a list of numbers.",
    "The user asked for a refund; verify the payment before approving it.",
    "Thank you! Your request has been completed successfully.",
    "Sorry, I could not find a user with that identifier.",
    "First, I need to know the account balance before making a transfer.",
    "def add(a, b):\n    return a + b\n",
    "for i in range(10):\n    print(i * i)\n",
    "import json\nprint(json.dumps({'ok': True}))\n",
    "Reference experience from a different task that was already solved.",
]

_TOOLS = [
    ("get_user", "Look up a user by id.", {"user_id": "integer"}),
    ("search_flights", "Search flights between two cities.", {"origin": "string", "destination": "string",
                                                             "date": "string"}),
    ("add_to_cart", "Put items in the cart; returns the cart.", {"item": "string", "qty": "integer"}),
    ("price", "Look up the price of an item.", {"item": "string"}),
    ("checkout", "Pay for the cart; returns the total paid.", {}),
    ("send_message", "Send a message to a contact.", {"to": "string", "text": "string"}),
    ("get_weather", "Current weather for a city.", {"city": "string", "unit": "string"}),
    ("transfer", "Move money between accounts.", {"source": "string", "target": "string",
                                                  "amount": "number"}),
]
_WORDS = ["apple", "pear", "milk", "Paris", "Berlin", "Tokyo", "alice", "bob", "celsius", "order",
          "refund", "hotel", "ticket", "invoice", "user", "account", "balance", "coffee", "book"]


def _schema(name: str, desc: str, params: dict[str, str]) -> dict:
    props = {k: {"type": t, "description": f"The {k.replace('_', ' ')}."} for k, t in params.items()}
    return {"name": name, "description": desc,
            "parameters": {"type": "object", "properties": props, "required": list(params)}}


def _value(rng: random.Random, kind: str):
    if kind == "integer":
        return rng.randint(0, 999)
    if kind == "number":
        return round(rng.uniform(0, 500), 2)
    return rng.choice(_WORDS)


def build_corpus(n_episodes: int = 120, seed: int = 0) -> list[str]:
    """Documents of the tokenizer corpus (deterministic for a given ``n_episodes`` and ``seed``)."""
    rng = random.Random(seed)
    docs = list(_ENGLISH)
    schemas = [_schema(*t) for t in _TOOLS]
    for _ in range(n_episodes):
        tools = rng.sample(schemas, k=rng.randint(1, 3))
        parts = [render_tools_system_prompt(tools, rng.choice([None, "You are a careful agent."])),
                 rng.choice(_ENGLISH)]
        for _ in range(rng.randint(1, 3)):
            t = rng.choice(tools)
            args = {k: _value(rng, v["type"]) for k, v in t["parameters"]["properties"].items()}
            parts.append(f"<think>\nI should call {t['name']} now.\n</think>\n\n" + render_tool_call(t["name"], args))
            result = {"ok": rng.random() > 0.2, "value": _value(rng, rng.choice(["integer", "string"]))}
            parts.append(wrap_tool_response(json.dumps(result)))
        parts.append(rng.choice(_ENGLISH))
        docs.append("\n".join(parts))
    return docs
