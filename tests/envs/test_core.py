import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers lopd/* ids)
from envs.core import Task, TextSpace, ToolEnv, checklist_reward
from envs.examples.shop import ShopEnv
from envs.protocol import render_tool_call
from envs.tools import ToolSet, tool


def act(*calls):
    return "\n".join(render_tool_call(n, a) for n, a in calls)


def test_shop_episode_solves_and_scores():
    env = gym.make("lopd/shop-v0")
    obs, info = env.reset(seed=0, options={"task_id": "apples"})
    assert obs == "Buy 2 apples, then pay."
    assert [t["function"]["name"] for t in info["tools"]] == ["add_to_cart", "checkout", "price"]
    assert info["messages"][0]["role"] == "system" and "<tools>" in info["messages"][0]["content"]
    obs, r, term, trunc, info = env.step(act(("add_to_cart", {"item": "apple", "qty": 2}), ("checkout", {})))
    assert obs == '<tool_response>\n{"apple": 2}\n</tool_response>\n<tool_response>\n4\n</tool_response>'
    assert (r, term, trunc) == (0.0, False, False)
    step = info["step"]
    assert [c.name for c in step.calls] == ["add_to_cart", "checkout"] and all(c.executed for c in step.calls)
    assert [m["role"] for m in info["messages"]] == ["assistant", "tool", "tool"]
    obs, r, term, trunc, info = env.step("All done: two apples bought.")
    assert (obs, r, term, trunc) == ("", 1.0, True, False)
    assert info["final_reward"] == 1.0


def test_partial_credit_and_errors_are_counted():
    env = ShopEnv()
    env.reset(options={"task_id": "apples"})
    _, _, _, _, info = env.step(act(("add_to_cart", {"item": "apple"}), ("fly", {}), ("add_to_cart", {"qty": "2"})))
    step = info["step"]
    assert step.n_tool_errors == 2
    assert "unknown tool 'fly'" in step.calls[1].error
    assert "missing required argument(s) for add_to_cart: item" in step.calls[2].error
    _, _, _, _, info = env.step(act(("add_to_cart", {"item": "apple", "qty": "x"}), ("price", {"thing": "apple"})))
    assert info["step"].n_tool_errors == 2
    assert "argument 'qty' of add_to_cart must be an integer, got str" in info["step"].calls[0].error
    assert "unknown argument(s) for price: thing" in info["step"].calls[1].error
    _, _, _, _, info = env.step('<tool_call>{"name": "checkout", "arguments": {</tool_call>')
    assert info["step"].n_parse_errors == 1 and not info["step"].calls[0].executed
    env.step(act(("checkout", {})))
    _, r, term, _, _ = env.step("bye")
    assert term and r == 0.5  # cart wrong, but paid


def test_tool_that_raises_continues_by_default_and_ends_when_the_spec_says():
    class StrictShop(ShopEnv):
        end_on_tool_error = True

    for cls, ends in [(ShopEnv, False), (StrictShop, True)]:
        env = cls()
        env.reset(options={"task_id": "apples"})
        obs, r, term, _, info = env.step(act(("add_to_cart", {"item": "kiwi"}), ("checkout", {}), ("price", {"item": "x"})))
        assert "checkout raised KeyError" in obs
        assert term is ends
        assert r == 0.0
        executed = [c.executed for c in info["step"].calls]
        assert executed == ([True, True, False] if ends else [True, True, True])


def test_first_call_policy_runs_only_the_first():
    env = ShopEnv(call_policy="first")
    env.reset(options={"task_id": "apples"})
    obs, *_, info = env.step(act(("add_to_cart", {"item": "apple", "qty": 2}), ("checkout", {})))
    assert [c.executed for c in info["step"].calls] == [True, False]
    assert obs.count("<tool_response>") == 1 and env.state.paid == 0


def test_step_budget_truncates_and_still_verifies():
    env = ShopEnv(max_steps=2)
    env.reset(options={"task_id": "apples"})
    assert env.step(act(("add_to_cart", {"item": "apple", "qty": 2})))[3] is False
    _, r, term, trunc, info = env.step(act(("checkout", {})))
    assert (term, trunc, r) == (False, True, 1.0)
    obs, r, term, trunc, info = env.step(act(("checkout", {})))
    assert info == {"error": "episode_over"} and term


def test_no_call_can_continue_when_spec_says():
    class Chatty(ShopEnv):
        end_on_no_call = False

    env = Chatty()
    env.reset(options={"task_id": "apples"})
    obs, r, term, trunc, _ = env.step("thinking out loud")
    assert obs == "Error: no tool call found in the response." and not term


def test_splits_and_seeded_task_choice():
    env = ShopEnv(split="eval")
    assert [t.task_id for t in env.tasks] == ["mix"]
    env = ShopEnv()
    a = [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    b = [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert a == b and set(a) == {"apples", "mix"}
    with pytest.raises(KeyError, match="no task 'zzz'"):
        env.reset(options={"task_id": "zzz"})


def test_all_tasks_and_the_reset_hooks():
    env = ShopEnv(split="eval")
    assert [t.task_id for t in env.all_tasks()] == ["apples", "mix"]  # whatever the split keeps
    assert env.all_tasks() is not env.all_tasks()
    assert env.reset(options={"task_id": "apples"})[1]["task_id"] == "apples"  # an id of any split
    with pytest.raises(ValueError, match="no tasks in split 'none'"):
        ShopEnv(split="none").reset(seed=0)

    class Last(ShopEnv):
        def select_task(self, seed, options):
            return self.all_tasks()[-1]

        def begin_episode(self, task, state):
            obs, info = super().begin_episode(task, state)
            return obs.upper(), {**info, "seed": None}

    env = Last()
    obs, info = env.reset(seed=3)
    assert obs == "BUY A PEAR AND A MILK, THEN PAY." and info["task_id"] == "mix" and "seed" in info
    assert info["messages"][1]["content"] == "Buy a pear and a milk, then pay."
    assert env.messages[0]["role"] == "system"
    assert sorted(s["function"]["name"] for s in info["tools"]) == ["add_to_cart", "checkout", "price"]


def test_broken_verifier_scores_zero_with_reason():
    class Broken(ShopEnv):
        def verify(self, task, shop):
            raise ZeroDivisionError("oops")

    env = Broken()
    env.reset(options={"task_id": "apples"})
    _, r, _, _, info = env.step("done")
    assert r == 0.0 and info["verify_error"] == "ZeroDivisionError: oops"


def test_checklist_reward_edge_cases():
    def boom():
        raise ValueError

    assert checklist_reward([]) == 0.0
    assert checklist_reward([True, lambda: False, boom, lambda: 1, lambda: True]) == 0.4


def test_toolset_state_and_render():
    class Counter:
        def __init__(self):
            self.n = 0

        @tool
        def bump(self) -> int:
            """Add one."""
            self.n += 1
            return self.n

    class CountEnv(ToolEnv):
        def load_tasks(self):
            return [Task("t", "bump twice")]

        def setup(self, task):
            return ToolSet.from_object(Counter())

        def verify(self, task, tools):
            return float(tools.call("bump", {}).content == "3")

    env = CountEnv(render_mode="ansi")
    env.reset()
    env.step(act(("bump", {}), ("bump", {})))
    assert env.step("ok")[1] == 1.0
    assert "[assistant] ok" in env.render()


def test_text_space():
    space = TextSpace(seed=0)
    assert space.contains("ünïcödé <tool_call> 中文") and not space.contains(3)
    assert all(space.contains(space.sample()) for _ in range(20))
