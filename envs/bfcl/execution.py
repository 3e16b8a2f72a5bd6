"""Execute BFCL multi-turn call strings against the official simulated API classes, without ``eval``.

BFCL (bfcl-eval 2025.8.6.2) prefixes every ``name(`` in a call string that names a public method of
an involved class with that instance's variable name (even inside string literals), refuses
``kill/exit/quit/remove/unlink/popen/Popen/run``, ``eval``s the string, and turns the return value
into text (strings as they are, dicts as JSON, the rest with ``str``); an exception becomes
``"Error during execution: <message>"``. We do the same rewrite and the same text conversion, but
evaluate the string with a small interpreter that allows only literals, arithmetic and calls of
public methods of this episode's instances. Differences arise only where upstream's ``eval`` would
reach Python builtins or module globals (e.g. ``print(...)``): here such names are undefined.

>>> s = ApiSession("multi_turn_base_0", ["MathAPI"], {}, tag="demo")
>>> s.execute(["add(a=1, b=2)", "nope(x=1)"])
['{"result": 3}', "Error during execution: name 'nope' is not defined"]
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import re
import warnings
from functools import cache
from typing import Any

from envs.bfcl.decode import _MAX_POW_EXP, _unsafe_binop
from envs.pythonic import BINARY_OPS, COMPARE_OPS, UNARY_OPS

CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
STATELESS_CLASSES = ("MathAPI",)
BLOCKED_CALLS = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
_CALL_NAME = re.compile(r"\b([a-zA-Z_]\w*)\s*(?=\()")
MAX_CALL_CHARS = 200_000


INSTALL_HINT = "pip install --no-deps bfcl-eval==2025.8.6.2"
"""How to get the simulated API classes (the wheel's declared deps are model SDKs they never import)."""


@cache
def api_class(name: str) -> type:
    """The official simulated class (imported from the bfcl-eval wheel).

    Raises ImportError naming :data:`INSTALL_HINT` when the wheel (or the module of that class in it)
    is not installed; a missing dependency of an installed wheel is raised as it is.
    """
    if name not in CLASS_MODULES:
        raise KeyError(f"unknown BFCL API class {name!r}")
    module = f"{_PACKAGE}.{CLASS_MODULES[name]}"
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if not e.name or not (module == e.name or module.startswith(e.name + ".")):
            raise
        raise ImportError(
            f"BFCL multi-turn execution needs {name} from the bfcl-eval wheel, but {e.name!r} "
            f"cannot be imported; install it with: {INSTALL_HINT}",
            name=e.name,
        ) from e


@cache
def _public_methods(cls: type) -> tuple[str, ...]:
    return tuple(n for n, v in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_"))


def instance_tag(model_name: str) -> str:
    """BFCL's variable-name prefix for a model's instances at evaluation time."""
    return model_name.replace("-", "_").replace(".", "_").replace("/", "_")


def is_long_context(entry_id: str) -> bool:
    category = entry_id.rsplit("_", 1)[0]
    return "long_context" in category or "composite" in category


class _EvalError(Exception):
    pass


class ApiSession:
    """Fresh instances of an entry's classes, loaded with its initial_config, plus an executor."""

    def __init__(
        self,
        entry_id: str,
        involved_classes: list[str],
        initial_config: dict[str, Any],
        tag: str = "lopd_eval",
    ):
        self.entry_id = entry_id
        long_context = is_long_context(entry_id)
        self.instances: dict[str, Any] = {}
        self._by_var: dict[str, Any] = {}
        self._owner: dict[str, str] = {}
        for cls_name in involved_classes:
            obj = api_class(cls_name)()
            if cls_name not in STATELESS_CLASSES:
                obj._load_scenario(copy.deepcopy(initial_config.get(cls_name, {})), long_context=long_context)
            var = f"{instance_tag(tag)}_{entry_id}_{cls_name.lower()}_instance"
            self.instances[cls_name] = obj
            self._by_var[var] = obj
            for m in _public_methods(type(obj)):
                self._owner[m] = var

    # ---- one call string ----------------------------------------------------------------
    def _rewrite(self, call: str) -> str:
        return _CALL_NAME.sub(
            lambda m: f"{self._owner[m.group(1)]}.{m.group(1)}" if m.group(1) in self._owner else m.group(1),
            call,
        )

    def execute_one(self, call: str) -> str:
        if not isinstance(call, str):
            return f"Error during execution: call must be a string, got {type(call).__name__}"
        if len(call) > MAX_CALL_CHARS:
            return f"Error during execution: call longer than {MAX_CALL_CHARS} characters"
        processed = self._rewrite(call)
        try:
            head = processed.split("(")[0] if "(" in processed else processed
            if "." in head:
                head = head.split(".")[1]
            if head in BLOCKED_CALLS:
                raise _EvalError(f"Function call {head} is not allowed.")
            result = self._evaluate(processed)
            if type(result) is str:
                return result
            if type(result) is dict:
                try:
                    return json.dumps(result)
                except Exception:  # noqa: BLE001 (what does not dump is shown as str, as upstream does)
                    return str(result)
            return str(result)
        except RecursionError:
            return "Error during execution: maximum recursion depth exceeded"
        except Exception as e:  # noqa: BLE001 (the official executor reports every exception as text)
            return f"Error during execution: {e}"

    def execute(self, calls: list[str]) -> list[str]:
        return [self.execute_one(c) for c in calls]

    # ---- the restricted interpreter -----------------------------------------------------
    def _evaluate(self, source: str) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source, filename="<string>", mode="eval")
            compile(tree, "<string>", "eval")  # same compile-time SyntaxErrors as eval(); nothing runs
        return self._ev(tree.body)

    def _ev(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self._by_var:
                return self._by_var[node.id]
            raise NameError(f"name '{node.id}' is not defined")
        if isinstance(node, ast.Attribute):
            obj = self._ev(node.value)
            if node.attr.startswith("_") or not any(obj is o for o in self._by_var.values()):
                raise _EvalError(f"attribute access '{node.attr}' is not allowed")
            return getattr(obj, node.attr)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.List):
            return self._ev_unpacked(node.elts)
        if isinstance(node, ast.Tuple):
            return tuple(self._ev_unpacked(node.elts))
        if isinstance(node, ast.Set):
            return set(self._ev_unpacked(node.elts))
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.update(self._ev(v))
                else:
                    key = self._ev(k)
                    out[key] = self._ev(v)
            return out
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPS:
            return UNARY_OPS[type(node.op)](self._ev(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
            a, b = self._ev(node.left), self._ev(node.right)
            _guard_binop(type(node.op), a, b)
            return BINARY_OPS[type(node.op)](a, b)
        if isinstance(node, ast.Compare):
            left = self._ev(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = self._ev(comp)
                if not COMPARE_OPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for v in node.values:
                result = self._ev(v)
                if isinstance(node.op, ast.And) and not result:
                    return result
                if isinstance(node.op, ast.Or) and result:
                    return result
            return result
        if isinstance(node, ast.Subscript):
            return self._ev(node.value)[self._ev(node.slice)]
        if isinstance(node, ast.Slice):
            return slice(
                *(self._ev(x) if x is not None else None for x in (node.lower, node.upper, node.step))
            )
        raise _EvalError(f"unsupported expression: {type(node).__name__}")

    def _ev_unpacked(self, nodes: list[ast.expr]) -> list[Any]:
        """The values of list/tuple/set elements or call arguments, ``*x`` unpacked in place."""
        values: list[Any] = []
        for n in nodes:
            if isinstance(n, ast.Starred):
                values.extend(self._ev(n.value))
            else:
                values.append(self._ev(n))
        return values

    def _call(self, node: ast.Call) -> Any:
        fn = self._ev(node.func)
        if not inspect.ismethod(fn) or not any(fn.__self__ is o for o in self._by_var.values()):
            raise TypeError(f"'{type(fn).__name__}' object is not callable here")
        args = self._ev_unpacked(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self._ev(kw.value))
            else:
                kwargs[kw.arg] = self._ev(kw.value)
        if fn.__name__ == "power" and type(fn.__self__).__name__ == "MathAPI":
            _guard_power(args, kwargs)
        return fn(*args, **kwargs)


def _guard_binop(op: type, a: Any, b: Any) -> None:
    unsafe = _unsafe_binop(op, a, b)
    if unsafe:
        raise _EvalError(unsafe)


def _guard_power(args: list[Any], kwargs: dict[str, Any]) -> None:
    # Integer powers with huge exponents would hang the process (upstream would hang too).
    base = args[0] if args else kwargs.get("base")
    exp = args[1] if len(args) > 1 else kwargs.get("exponent")
    if type(base) is int and type(exp) is int and abs(base) > 1 and exp > _MAX_POW_EXP:
        raise _EvalError("exponent too large to evaluate safely")


def state_differences(model: dict[str, Any], truth: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Public attributes of each ground-truth instance that differ on the model's instance."""
    diffs: dict[str, dict[str, Any]] = {}
    for cls_name, gt in truth.items():
        mine = model[cls_name]
        for attr in vars(gt):
            if attr.startswith("_"):
                continue
            if not hasattr(mine, attr):
                diffs.setdefault(cls_name, {})[attr] = {
                    "model": "<missing>",
                    "ground_truth": getattr(gt, attr),
                }
                continue
            a, b = getattr(mine, attr), getattr(gt, attr)
            if a != b:
                diffs.setdefault(cls_name, {})[attr] = {"model": a, "ground_truth": b}
    return diffs


def missing_results(expected: list[str], got: list[str]) -> list[str]:
    """Items of ``expected`` not found in ``got``, counting duplicates (order-free containment)."""
    pool = list(got)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing
