"""LOPD Gym environments: the tool-use core and one sub-package per benchmark.

``import envs`` registers every ``lopd/*`` id with Gymnasium.
"""

from envs.core import Task, TextSpace, ToolEnv, checklist_reward
from envs.protocol import ParsedResponse, ToolCall, parse_tool_calls, render_tools_system_prompt
from envs.registry import register_env, registered_ids
from envs.tools import ToolResult, ToolSet, tool

__all__ = [
    "ParsedResponse", "Task", "TextSpace", "ToolCall", "ToolEnv", "ToolResult", "ToolSet",
    "checklist_reward", "parse_tool_calls", "register_env", "registered_ids",
    "render_tools_system_prompt", "tool",
]

from envs.registry import load_all as _load_all  # noqa: E402

_load_all()
