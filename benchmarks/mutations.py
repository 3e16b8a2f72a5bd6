"""Value and text mutations shared by the ACEBench and BFCL mutation generators.

``benchmarks/acebench_mutations.py`` and ``benchmarks/bfcl_mutations.py`` (with
``benchmarks/bfcl_official_agreement.py``'s fuzz cases) build their cases from these; the verdict each
case should get is decided by the official evaluators, never here.

>>> wrong_type(3), wrong_type("x"), wrong_type(True)
('3', 12345, 'true')
>>> import random
>>> fuzz_text("[f(a=1)]", random.Random(0), "xyz")
'[f(a1z]y'
"""

from __future__ import annotations

import json
import random
from typing import Any


def wrong_type(v: Any) -> Any:
    """``v`` as a value of another JSON type: numbers as strings, strings as a number, lists joined,
    dicts dumped, booleans as ``"true"``/``"false"``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return 12345
    if isinstance(v, list):
        return ",".join(map(str, v))
    if isinstance(v, dict):
        return json.dumps(v)
    return 0


def fuzz_text(text: str, rng: random.Random, alphabet: str) -> str:
    """One to four random character insertions, deletions or replacements (from ``alphabet``)."""
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randint(0, len(chars))
        if op < 0.4:
            chars.insert(pos, rng.choice(alphabet))
        elif op < 0.7 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(alphabet)
    return "".join(chars)
