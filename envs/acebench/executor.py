"""Running agent messages against the scenario classes, the way ACEBench's execution role does.

An :class:`AgentRuntime` holds one episode's instances (one per involved class, each loaded with
its own ``initial_config`` section and then with the ``BaseApi`` section). A message such as
``"[send_message(sender_name='Eve', receiver_name='Frank', message='hi')]"`` is decoded like
upstream's execution role and each call runs on EVERY instance that has the method (so
``turn_on_wifi`` reaches all phone apps); the last instance's return value is the result.

Upstream decoding quirks kept: one leading space is dropped, brackets are added when missing, then
``[]'`` characters are stripped from both ends before parsing; a single call, a tuple or a list
of calls is accepted (anything else decodes to no calls); positional arguments are dropped; a
keyword-less nested call becomes its source text; a dict argument is re-rendered as a call (and
fails to run, as upstream's ``eval`` would fail on it); inf/nan values fail to run. Upstream then
runs calls through ``eval`` on rendered strings; we call the bound methods directly and refuse
anything upstream would have had to evaluate as arbitrary Python (we report those as errors).

Results are rendered as upstream does: dicts through ``json.dumps`` then ``json.loads`` (so int keys
become strings), other values through ``str`` then ``json.loads`` when that parses. Errors differ
by mode: ``multi_step`` reports ``Error during execution: <e>`` per call and goes on;
``multi_turn`` abandons the message at the first error and upstream returns the *literal* text
``Error during execution: {str(e)}`` (an un-formatted f-string) split into characters.

>>> config = {"BaseApi": {"wifi": True, "logged_in": True}}
>>> rt = AgentRuntime("en", config, ["BaseApi", "MessageApi"], "multi_step")
>>> rt.respond("[delete_message(message_id=1)]").results
[{'status': True, 'message': 'Message 1 was deleted.'}]
>>> sorted(rt.snapshot()[1]["MessageApi"]["inbox"])
['2', '3', '4', '5', '6']
"""

from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from envs.acebench.decode import DecodeError, contains_nonfinite, parse_expression, resolve_call
from envs.acebench.expr_eval import Budget
from envs.acebench.scenarios import CLASSES, SAVED_ATTRIBUTES, make_instance, public_methods

Mode = Literal["multi_step", "multi_turn"]
DECODE_FAILURE_REPLY = "Please do not ask me any questions, use the known conditions to solve the problem"
MULTI_TURN_ERROR_TEXT = "Error during execution: {str(e)}"  # upstream forgot the f-prefix
_METHOD_CALL = re.compile(r"\b([a-zA-Z_]\w*)\s*(?=\()")


class _Unrunnable(Exception):
    """A call upstream would fail to eval (message = what the error would say)."""


@dataclass
class ExecCall:
    """One decoded call: the method name, its keyword arguments, and why it cannot run (if so)."""

    name: str
    kwargs: dict[Any, Any]
    text: str
    unrunnable: str | None = None


def _render_value(value: Any) -> str:
    """upstream parse_nested_value: dicts are rendered as calls, everything else with repr."""
    if isinstance(value, dict):
        fname = list(value.keys())[0]  # IndexError for {} -> decode failure upstream
        args = value[fname]
        body = ", ".join(f"{k}={_render_value(v)}" for k, v in args.items())  # AttributeError if not a dict
        return f"{fname}({body})"
    return repr(value)


def decode_execution_message(message: Any, mode: Mode) -> list[ExecCall]:
    """Decode an agent message into calls; raises ValueError when upstream's decoder raises."""
    if not isinstance(message, str):
        raise ValueError(f"message must be text, got {type(message).__name__}")
    func = message
    if not func:
        raise ValueError("string index out of range")
    if func[0] == " ":
        func = func[1:]
    if not func.startswith("["):
        func = "[" + func
    if not func.endswith("]"):
        func = func + "]"
    cleaned = func.strip("[]'")
    try:
        body = parse_expression(cleaned)
        budget = Budget()
        if isinstance(body, ast.Call):
            decoded = [resolve_call(body, call_text=True, budget=budget)]
        elif isinstance(body, (ast.Tuple, ast.List)):
            decoded = []
            for elem in body.elts:
                if isinstance(elem, ast.Call):
                    decoded.append(resolve_call(elem, call_text=True, budget=budget))
                elif mode == "multi_step":
                    raise ValueError("Element is not a function call")
                # multi_turn: the agent-side check rejects the message (see route_multi_turn)
                else:
                    raise ValueError("'bool' object is not iterable")
        else:
            decoded = []
    except (SyntaxError, DecodeError, RecursionError, MemoryError, TypeError) as e:
        raise ValueError(f"{type(e).__name__}: {e}") from None
    calls = []
    for item in decoded:
        for name, kwargs in item.items():
            try:
                text = f"{name}({', '.join(f'{k}={_render_value(v)}' for k, v in kwargs.items())})"
            except (IndexError, AttributeError, RecursionError) as e:
                raise ValueError(f"{type(e).__name__}: {e}") from None
            calls.append(ExecCall(name, kwargs, text, _why_unrunnable(kwargs)))
    return calls


def _why_unrunnable(kwargs: dict[Any, Any]) -> str | None:
    for k, v in kwargs.items():
        if k is None:
            return "invalid syntax"
        if isinstance(v, dict):
            fname = next(iter(v))
            return (
                f"name '{fname}' is not defined"
                if isinstance(fname, str) and fname.isidentifier()
                else "invalid syntax"
            )
        if contains_nonfinite(v):
            return "name 'inf' is not defined" if "inf" in repr(v) else "name 'nan' is not defined"
    return None


def _holds_brackets(message: str) -> bool:
    r"""Upstream's ``re.search(r"\[.*\]", message)`` (no DOTALL: one line holds ``[`` then ``]``), in linear
    time: the regex backtracks quadratically on a line of many ``[`` (40 s for 100k)."""
    for line in message.split("\n"):
        first = line.find("[")
        if first != -1 and line.rfind("]") > first:
            return True
    return False


def is_execution_request(message: Any) -> bool:
    """multi_turn routing: the message goes to execution when it holds ``[...]`` and decodes."""
    if not isinstance(message, str) or not _holds_brackets(message):
        return False
    try:
        decode_execution_message(message, "multi_turn")
    except ValueError:
        return False
    return True


@dataclass
class Execution:
    """What the execution role answered to one agent message."""

    results: Any
    """The message upstream shows the agent: a list of results, or a text."""
    recorded: bool
    """Whether upstream adds the instances to its saved result after this message."""
    errors: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.results if isinstance(self.results, str) else str(self.results)


def _format_result(value: Any) -> Any:
    if type(value) is str:
        text = value
    elif type(value) is dict:
        try:
            text = json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            text = str(value)
    else:
        text = str(value)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


class AgentRuntime:
    """One agent episode's scenario instances and upstream's execution semantics."""

    def __init__(
        self, language: str, initial_config: dict[str, Any], involved_classes: list[str], mode: Mode
    ):
        unknown = [c for c in involved_classes if c not in CLASSES]
        if unknown:
            raise ValueError(f"unknown scenario classes {unknown}; known: {', '.join(CLASSES)}")
        if mode not in ("multi_step", "multi_turn"):
            raise ValueError(f"mode must be 'multi_step' or 'multi_turn', got {mode!r}")
        self.language, self.mode = language, mode
        self.involved_classes = list(involved_classes)
        self.instances: dict[str, Any] = {}
        base_config = copy.deepcopy((initial_config or {}).get("BaseApi", {}))
        for name in self.involved_classes:
            inst = make_instance(name, language)
            inst._load_scenario(copy.deepcopy((initial_config or {}).get(name, {})))
            inst._load_scenario(copy.deepcopy(base_config))
            self.instances[name] = inst
        self.method_owners: dict[str, list[str]] = {}
        for name, inst in self.instances.items():
            for method in public_methods(inst):
                self.method_owners.setdefault(method, []).append(name)
        self.recorded = False

    # ---- running ---------------------------------------------------------------------------
    def respond(self, message: Any) -> Execution:
        """The execution role's answer to one agent message (never raises)."""
        try:
            calls = decode_execution_message(message, self.mode)
        except ValueError as e:
            # multi_step answers with a fixed reply; multi_turn never routes such a message here
            return Execution(DECODE_FAILURE_REPLY, False, [str(e)])
        results: list[Any] = []
        errors: list[str] = []
        last: Any = _NOTHING
        for call in calls:
            try:
                last = self._run(call, last)
                results.append(last)
            except Exception as e:  # noqa: BLE001 - a tool's failure is an observation
                errors.append(f"{type(e).__name__}: {e}")
                if self.mode == "multi_turn":
                    return Execution(list(MULTI_TURN_ERROR_TEXT), False, errors)
                results.append(f"Error during execution: {e}")
        self.recorded = True
        return Execution([_format_result(r) for r in results], True, errors)

    def _run(self, call: ExecCall, last: Any) -> Any:
        match = _METHOD_CALL.search(call.text)
        owners = self.method_owners.get(match.group(1), []) if match else []
        if not owners:
            if last is _NOTHING:
                raise UnboundLocalError(
                    "cannot access local variable 'func_call_result' where it is not associated with a value"
                )
            return last  # upstream appends the previous call's result again
        if match.start() != 0 or match.group(1) != call.name:
            head = call.name.split(".")[0]
            raise NameError(f"name '{head}' is not defined" if head.isidentifier() else "invalid syntax")
        if call.unrunnable:
            raise (NameError if call.unrunnable.startswith("name") else SyntaxError)(call.unrunnable)
        value = None
        for owner in owners:
            value = getattr(self.instances[owner], call.name)(**{str(k): v for k, v in call.kwargs.items()})
        return value

    # ---- saving ----------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, dict[str, Any]]]:
        """The saved class attributes as upstream writes them (JSON round trip: int keys -> str).

        Empty until some execution was recorded, as upstream saves nothing before that.
        """
        if not self.recorded:
            return []
        out = []
        for name in self.involved_classes:
            inst = self.instances[name]
            out.append({name: {a: getattr(inst, a) for a in SAVED_ATTRIBUTES[name] if hasattr(inst, a)}})
        return json.loads(json.dumps(out, ensure_ascii=False, default=repr))


class _Nothing:
    pass


_NOTHING = _Nothing()
