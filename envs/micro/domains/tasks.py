"""What the domains' task generators share: ids, init_config tables, check sources, the two draws.

Every domain has two templates; the first is drawn with probability ``FIRST_TEMPLATE_SHARE``
(:func:`first_template`). The task text is the last draw a task makes from its ``rng``
(:func:`task`), so building the checklist first changes no draw.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from envs.micro.domains.base import TaskSpec

FIRST_TEMPLATE_SHARE = 0.6
"""Probability that a task takes its domain's first template."""


def new_ids(rng: random.Random, prefix: str, k: int) -> list[str]:
    """k distinct ids like 'C418' (three digits, so they must be read, not guessed)."""
    return [f"{prefix}{n}" for n in rng.sample(range(100, 1000), k)]


def table(id_key: str, ids: Sequence[str], **columns: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """An init_config table: one row per id, keyed by it; row ``i`` takes the ``i``-th value of every column.

    >>> table("member_id", ["M1", "M2"], name=["Ada Park", "Bo Chen"])
    {'M1': {'member_id': 'M1', 'name': 'Ada Park'}, 'M2': {'member_id': 'M2', 'name': 'Bo Chen'}}
    """
    names = list(columns)
    return {
        i: {id_key: i, **dict(zip(names, values, strict=True))}
        for i, *values in zip(ids, *columns.values(), strict=True)
    }


def check(item: str, *body: str) -> dict[str, str]:
    """A checklist entry: ``check_func(final_state)`` with ``body`` as its lines."""
    lines = "".join(f"    {line}\n" for line in body)
    return {"check_item": item, "check_func": f"def check_func(final_state):\n{lines}"}


def rows(table: str, extra: str = "", **equal: Any) -> str:
    """Source of the list of ``final_state[table]`` rows whose fields equal ``equal`` (and ``extra`` holds).

    >>> rows("orders", customer_id="C1")
    "[r for r in final_state['orders'].values() if r['customer_id'] == 'C1']"
    """
    conds = [f"r[{k!r}] == {v!r}" for k, v in equal.items()] + ([extra] if extra else [])
    return f"[r for r in final_state[{table!r}].values() if {' and '.join(conds)}]"


def cell(table: str, key: str, column: str) -> str:
    """Source of one value of ``final_state`` (check sources read the final state this way).

    >>> cell("orders", "O1", "status")
    "final_state['orders']['O1']['status']"
    """
    return f"final_state[{table!r}][{key!r}][{column!r}]"


def first_template(rng: random.Random) -> bool:
    """Whether this task takes its domain's first template (one draw from ``rng``)."""
    return rng.random() < FIRST_TEMPLATE_SHARE


def task(
    rng: random.Random,
    template: str,
    texts: Sequence[str],
    init_config: dict[str, Any],
    checklist: list[dict[str, str]],
    params: dict[str, Any],
) -> TaskSpec:
    """The task of ``template``: its text is one of ``texts`` (the task's last draw from ``rng``) with
    ``{param}`` fields filled in from ``params``."""
    return TaskSpec(template, rng.choice(texts).format(**params), init_config, checklist, params)
