"""The memory model's terms against the real thing at small shapes: parameter counts of transformers'
Qwen3, the bytes autograd saves per token (counted with saved_tensors_hooks), and the fit's bounds."""

from __future__ import annotations

import functools

import pytest
import torch

from harness.config import load_config
from harness.training.memory_model import (ModelShape, fit_micro_batch_tokens, layer_activation_bytes,
                                           lora_extra_bytes, predict_peak, stack_activation_bytes)
from harness.training.train_config import TrainConfig

SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "intermediate_size": 96, "vocab_size": 128, "tie_word_embeddings": True}
QWEN3_4B = {**SMALL, "hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 9728, "vocab_size": 151936}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def qwen3(layers: int = 2, dtype: str = "float32", **kw):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    fields = {**SMALL, **kw, "num_hidden_layers": layers}
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**fields, layer_types=["full_attention"] * layers)).to(DTYPES[dtype])


@functools.lru_cache(maxsize=None)
def _cached(layers: int, dtype: str):
    return qwen3(layers, dtype)


def saved_bytes(model, tokens: int, *, pad: bool = False) -> int:
    """Bytes of the distinct storages autograd saves in the decoder's forward (parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    dtype = next(model.parameters()).dtype
    emb = torch.randn(1, tokens, model.config.hidden_size, dtype=dtype, requires_grad=True)
    attn = torch.ones(1, tokens, dtype=torch.long)
    if pad:
        attn[0, -1] = 0  # an explicit mask: no causal fast path
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(inputs_embeds=emb, attention_mask=attn, use_cache=False)
    return sum(seen.values())


def per_layer(tokens: int, **kw) -> int:
    """What one more decoder layer adds to the saved bytes (a model of 2 layers minus one of 1)."""
    build = {k: kw.pop(k) for k in ("dtype", "frozen") if k in kw}
    out = []
    for layers in (1, 2):
        m = _cached(layers, build.get("dtype", "float32"))
        m.requires_grad_(not build.get("frozen", False))
        out.append(saved_bytes(m, tokens, **kw))
    return out[1] - out[0]


def config(*over: str) -> TrainConfig:
    return load_config(TrainConfig, None, list(over))


@pytest.mark.parametrize("tied", [True, False])
def test_parameters_equal_transformers(tied):
    m = qwen3(2, tie_word_embeddings=tied)
    shape = ModelShape.from_hf(m.config)
    assert shape.params() == sum(p.numel() for p in m.parameters())
    assert ModelShape.from_hf({**SMALL, "tie_word_embeddings": tied}).params() == shape.params()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("frozen", [False, True])
def test_layer_activations_equal_saved_tensors(dtype, frozen):
    shape, wb = ModelShape.from_hf(SMALL), {"float32": 4, "bfloat16": 2}[dtype]
    for t in (16,):
        assert per_layer(t, dtype=dtype, frozen=frozen) == t * layer_activation_bytes(shape, wb, not frozen)
        # a padding mask: k and v repeated to every head, and the mask kept in the query dtype
        assert per_layer(t, dtype=dtype, frozen=frozen, pad=True) == \
            t * layer_activation_bytes(shape, wb, not frozen, mask_keys=t)


def test_whole_stack_and_checkpointing():
    shape, t = ModelShape.from_hf(SMALL), 32
    m = qwen3(2)
    cos_sin_and_norm = saved_bytes(m, t) - t * 2 * layer_activation_bytes(shape, 4, True)
    assert saved_bytes(m, t) == stack_activation_bytes(shape, 4, t, True, False)
    assert cos_sin_and_norm == t * (4 * 64 + 4 + 4 * 64 + 2 * 4 * 16)
    from lopd.checkpointing import checkpoint_layers

    checkpoint_layers(m.model.layers)  # each layer keeps its input [T, d] only
    # cos and sin stay alive as the checkpoint's arguments (held by reference, not through the hooks)
    assert saved_bytes(m, t) == stack_activation_bytes(shape, 4, t, True, True) - t * 2 * 4 * 16
    assert stack_activation_bytes(shape, 4, t, True, False) - stack_activation_bytes(shape, 4, t, True, True) == \
        t * 2 * (layer_activation_bytes(shape, 4, True) - 4 * 64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lora_extra_equals_saved_tensors(dtype):
    from peft import LoraConfig, get_peft_model

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    shape, wb, t = ModelShape.from_hf(SMALL), {"float32": 4, "bfloat16": 2}[dtype], 16
    counts = []
    for layers in (1, 2):
        m = qwen3(layers, dtype)
        m.requires_grad_(False)
        peft = get_peft_model(m, LoraConfig(r=4, lora_alpha=8, target_modules=targets))
        counts.append(saved_bytes(peft.get_base_model(), t))
    assert counts[1] - counts[0] == t * (layer_activation_bytes(shape, wb, False) +
                                         lora_extra_bytes(shape, wb, 4, targets))


def test_checkpointing_lowers_the_prediction_by_the_activation_formula():
    off, on = (predict_peak(config(f"model.gradient_checkpointing={c}", "model.dtype=bfloat16"), QWEN3_4B,
                            tokens=4096) for c in ("false", "true"))
    shape = ModelShape.from_hf(QWEN3_4B)
    saved = 4096 * 36 * (layer_activation_bytes(shape, 2, True) - 2 * 2560)
    assert off.step["student_activations"] - on.step["student_activations"] == saved
    assert off.static == on.static
    assert on.total < off.total


def test_the_teacher_graph_after_the_student_takes_the_larger_graph_not_both():
    """lopd.teacher_graph=after_student: the composer's backward holds the teacher's graph beside the
    student's gradients instead of its activations; the encoders' graphs move into the student's phases."""
    over = ("learner=lopd", "model.dtype=bfloat16", "lopd.composer.max_encoder_tokens=512")
    one, two = (predict_peak(config(*over, f"lopd.teacher_graph={g}"), QWEN3_4B, tokens=4096)
                for g in ("with_student", "after_student"))
    st = one.step
    assert one.phases["composer_backward"] - two.phases["composer_backward"] == \
        st["student_activations"] - st["gradients"]
    encoders = st["encoder_activations"] + st["qformer_activations"]
    assert two.phases["backward_top_layer"] - one.phases["backward_top_layer"] == \
        encoders - st["composer_gradients"]  # the composer's gradients come after the student's backward
    assert one.phase == "composer_backward" and two.total < one.total  # at 4k tokens without checkpointing
    frozen = [predict_peak(config(*over, "lopd.train_composer=false", f"lopd.teacher_graph={g}"), QWEN3_4B,
                           tokens=4096).total for g in ("with_student", "after_student")]
    assert frozen[0] == frozen[1]  # no teacher graph to move


def test_qwen3_4b_parts():
    est = predict_peak(config("model.dtype=bfloat16"), QWEN3_4B, tokens=1024)
    assert est.static["weights"] == 2 * 4_022_468_096  # Qwen3-4B's 4.02 B parameters
    assert "initial_weights" in est.host and "initial_weights" not in est.static  # on the CPU, not the GPU
    assert predict_peak(config("model.dtype=bfloat16"), QWEN3_4B, 1024, "cpu").static["initial_weights"] > 0
    assert "weights" in est.table() and est.total == est.static_total + est.step_total
    lopd = predict_peak(config("learner=lopd", "model.dtype=bfloat16", "lopd.composer.max_encoder_tokens=512"),
                        QWEN3_4B, tokens=1024)
    assert lopd.static["frozen_teacher"] == est.static["weights"] and lopd.total > est.total


def test_fit_micro_batch_tokens_bounds():
    cfg = config("model.dtype=bfloat16")
    budget = 60e9
    t = fit_micro_batch_tokens(cfg, QWEN3_4B, budget)
    assert predict_peak(cfg, QWEN3_4B, t).total <= budget < predict_peak(cfg, QWEN3_4B, t + 256).total
    with pytest.raises(ValueError, match="static part alone"):
        fit_micro_batch_tokens(cfg, QWEN3_4B, 10e9)


def test_bad_inputs():
    with pytest.raises(ValueError, match="tokens must be >= 1"):
        predict_peak(config(), SMALL, tokens=-5)
    cfg = config()
    cfg.learner = "mine"  # a plugin's learner: the model does not know what it keeps
    with pytest.raises(ValueError, match="unknown learner 'mine'"):
        predict_peak(cfg, SMALL, tokens=16)
    with pytest.raises(ValueError, match="device"):
        predict_peak(config(), SMALL, tokens=16, device="tpu")
