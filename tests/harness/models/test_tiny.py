"""The tiny default model, the project's tokenizer and chat template, save/load round trips."""
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Qwen3Config, Qwen3ForCausalLM

from envs.protocol import render_tool_call, render_tools_system_prompt
from harness.models import PRESETS, build_tiny_model, build_tokenizer, count_parameters, load_model, save_pretrained
from harness.models.corpus import build_corpus
from harness.models.tokenizer import CONTROL_TOKENS, MARKUP_TOKENS
from lopd.latent import LATENT_SENTINEL


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.mark.parametrize("preset,lo,hi", [("1m", 0.7e6, 1.3e6), ("5m", 4.0e6, 6.0e6)])
def test_presets_sizes(preset, lo, hi, tok):
    model, _ = build_tiny_model(preset, tokenizer=tok)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert lo < count_parameters(model) < hi
    assert model.config.vocab_size >= len(tok)
    with pytest.raises(KeyError):
        build_tiny_model("7b", tokenizer=tok)
    assert set(PRESETS) == {"1m", "5m"}


def test_tokenizer_special_tokens_are_single_ids(tok):
    for t in CONTROL_TOKENS + MARKUP_TOKENS:
        ids = tok.encode(t, add_special_tokens=False)
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids[0]) == t
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert LATENT_SENTINEL in CONTROL_TOKENS
    text = "<think>ok</think>\n<tool_call>\n{}\n</tool_call><|im_end|>"
    # Markup survives skip_special_tokens (as in Qwen3); control tokens do not.
    assert tok.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True) == text[:-len("<|im_end|>")]


def test_tokenizer_is_deterministic(tok):
    assert build_tokenizer().get_vocab() == tok.get_vocab()
    assert build_corpus() == build_corpus()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_byte_level_round_trip(tok_text):
    tok = _TOK
    assert tok.decode(tok.encode(tok_text, add_special_tokens=False)) == tok_text


_TOK = build_tokenizer()

SHOP_TOOLS = [{"name": "price", "description": "Look up the price of an item.",
               "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}]


def test_chat_template_renders_qwen3_format(tok):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Price of an apple?"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "price", "arguments": {"item": "apple"}}}]},
            {"role": "tool", "name": "price", "content": "2"}, {"role": "tool", "name": "price", "content": "3"},
            {"role": "assistant", "content": "It costs 2."}]
    text = tok.apply_chat_template(msgs, tools=SHOP_TOOLS, tokenize=False)
    system = render_tools_system_prompt(SHOP_TOOLS, "Be brief.")
    expected = (f"<|im_start|>system\n{system}<|im_end|>\n"
                "<|im_start|>user\nPrice of an apple?<|im_end|>\n"
                f"<|im_start|>assistant\n{render_tool_call('price', {'item': 'apple'})}<|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n2\n</tool_response>\n<tool_response>\n3\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n<think>\n\n</think>\n\nIt costs 2.<|im_end|>\n")
    assert text == expected
    # The env puts the tools into the system message itself; both paths give the same prompt.
    env_style = [{"role": "system", "content": system}, msgs[1]]
    assert tok.apply_chat_template(env_style, tokenize=False, add_generation_prompt=True) == \
        tok.apply_chat_template(msgs[:2], tools=SHOP_TOOLS, tokenize=False, add_generation_prompt=True)


def test_chat_template_reasoning_and_generation_prompt(tok):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nplan\n</think>\n\nhello"},
            {"role": "user", "content": "again"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    # Reasoning of turns before the last user query is dropped, as in Qwen3.
    assert text == ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
                    "<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_save_load_round_trip(tmp_path, tok):
    model, _ = build_tiny_model("1m", seed=3, tokenizer=tok)
    save_pretrained(model, tok, tmp_path / "m")
    model2, tok2 = load_model(tmp_path / "m")
    x = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(model(x).logits, model2(x).logits)
    assert tok2.get_vocab() == tok.get_vocab() and tok2.chat_template == tok.chat_template
    msgs = [{"role": "user", "content": "Buy 2 apples."}]
    assert tok2.apply_chat_template(msgs, tokenize=False) == tok.apply_chat_template(msgs, tokenize=False)
    assert tok2.eos_token == "<|im_end|>" and tok2.padding_side == "left"
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing")


def test_load_model_reads_a_plain_qwen3_checkpoint(tmp_path, tok):
    # A checkpoint written by transformers itself (as a real Qwen3 download is), in bf16.
    cfg = Qwen3Config(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32, tie_word_embeddings=False)
    Qwen3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp_path / "q")
    tok.save_pretrained(tmp_path / "q")
    model, _ = load_model(tmp_path / "q", dtype="auto")
    assert model.dtype == torch.bfloat16
    assert json.loads((tmp_path / "q" / "config.json").read_text())["model_type"] == "qwen3"


@pytest.mark.slow
def test_tiny_model_trains_and_round_trips(tmp_path, tok):
    torch.manual_seed(0)
    model, _ = build_tiny_model("1m", seed=0, tokenizer=tok)
    docs = build_corpus(n_episodes=16, seed=1)
    rows = [tok.encode(d, add_special_tokens=False)[:96] for d in docs]
    rows = [r for r in rows if len(r) == 96][:8]
    batch = torch.tensor(rows)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(12):
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0, losses
    model.eval()
    save_pretrained(model, tok, tmp_path / "trained")
    model2, _ = load_model(tmp_path / "trained")
    with torch.no_grad():
        assert torch.allclose(model(input_ids=batch).logits, model2(input_ids=batch).logits, atol=1e-6)
        assert abs(model2(input_ids=batch, labels=batch).loss.item() - losses[-1]) < 0.5
