"""Hypothesis: arbitrary model outputs never crash the BFCL verifier or the environments."""
import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401
from envs.bfcl.data import CATEGORIES, load_entries
from envs.bfcl.registration import env_id
from envs.bfcl.replay import ground_truth_output
from envs.bfcl.scoring import score_entry
from envs.data import has_data

pytestmark = pytest.mark.skipif(not has_data("bfcl_v3"), reason="BFCL-v3 data not found; set LOPD_DATA_DIR")

ALPHABET = "[](){}'\",=.:-_ \n`0123456789abcxyzTFN\\é+*/<>;" + "".join(chr(c) for c in range(0x20, 0x7f))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
SAMPLE = {c: [e for e in load_entries(c)[:3]] for c in CATEGORIES} if has_data("bfcl_v3") else {}


def _mutated(base: str, data) -> str:
    chars = list(base)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(chars)))
        if data.draw(st.booleans()) or not chars:
            chars.insert(pos, data.draw(st.sampled_from(ALPHABET)))
        else:
            del chars[min(pos, len(chars) - 1)]
    return "".join(chars)


@settings(max_examples=300)
@given(st.data())
def test_prompt_outputs_never_crash(data):
    cat = data.draw(st.sampled_from([c for c in CATEGORIES if not c.startswith("multi_turn")]))
    entry = data.draw(st.sampled_from(SAMPLE[cat]))
    base = ground_truth_output(entry, "prompt") if entry.answer is not None else "[f(a=1)]"
    text = data.draw(st.one_of(st.text(alphabet=ALPHABET, max_size=80), st.just(_mutated(base, data))))
    v = score_entry(entry, text, "prompt")
    assert isinstance(v.valid, bool) and isinstance(v.error_type, str)


@settings(max_examples=300)
@given(st.data())
def test_fc_outputs_never_crash(data):
    cat = data.draw(st.sampled_from([c for c in CATEGORIES if not c.startswith("multi_turn")]))
    entry = data.draw(st.sampled_from(SAMPLE[cat]))
    result = data.draw(st.one_of(
        json_values,
        st.lists(st.dictionaries(st.text(max_size=30), st.one_of(st.text(alphabet=ALPHABET, max_size=40), json_values),
                                 max_size=2), max_size=3)))
    assert isinstance(score_entry(entry, result, "fc").valid, bool)


@settings(max_examples=60)
@given(st.data())
def test_multi_turn_results_never_crash(data):
    cat = data.draw(st.sampled_from([c for c in CATEGORIES if c.startswith("multi_turn")]))
    entry = data.draw(st.sampled_from(SAMPLE[cat]))
    fmt = data.draw(st.sampled_from(["prompt", "fc"]))
    turns = ground_truth_output(entry, fmt)
    t = data.draw(st.integers(0, len(turns) - 1))
    if fmt == "prompt":
        turns[t] = [data.draw(st.text(alphabet=ALPHABET, max_size=60))] + turns[t]
    else:
        turns[t] = [data.draw(st.lists(st.dictionaries(st.text(max_size=12), json_values, max_size=2), max_size=2))]
    result = data.draw(st.one_of(st.just(turns), json_values))
    assert isinstance(score_entry(entry, result, fmt).valid, bool)


@settings(max_examples=40)
@given(st.data())
def test_env_steps_never_raise(data):
    cat = data.draw(st.sampled_from(CATEGORIES))
    fmt = data.draw(st.sampled_from(["prompt", "fc"]))
    env = gym.make(env_id(cat), fmt=fmt).unwrapped
    env.reset(seed=data.draw(st.integers(0, 10)))
    for _ in range(data.draw(st.integers(1, 4))):
        text = data.draw(st.text(alphabet=ALPHABET + "<tool_call>", max_size=120))
        obs, r, term, trunc, info = env.step(text)
        assert isinstance(obs, str) and r in (0.0, 1.0)
        if term or trunc:
            break
