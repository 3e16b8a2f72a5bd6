"""lopd.checkpointing: layers that recompute in the backward give the same numbers and keep less."""

from __future__ import annotations

import copy

import torch

from harness.models import build_tiny_model
from lopd.checkpointing import checkpoint_layers, is_checkpointed


def _loss_grads_saved(model, ids):
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, use_cache=False).logits.logsumexp(-1).sum()
    loss.backward()
    return loss.item(), {n: p.grad for n, p in model.named_parameters()}, sum(saved)


def test_checkpointed_layers_give_the_same_loss_and_gradients_and_keep_fewer_tensors():
    model, _ = build_tiny_model("1m")
    model = model.double().eval()  # eval mode: transformers' own checkpointing would not run here
    twin = copy.deepcopy(model)
    checkpoint_layers(twin.get_decoder().layers)
    checkpoint_layers(twin.get_decoder().layers)  # idempotent
    assert list(twin.state_dict()) == list(model.state_dict())
    ids = torch.randint(0, 500, (2, 48), generator=torch.Generator().manual_seed(0))
    loss, grads, saved = _loss_grads_saved(model, ids)
    loss_c, grads_c, saved_c = _loss_grads_saved(twin, ids)
    # the recompute runs the same float64 ops on the same inputs: the same bits
    assert loss_c == loss
    assert all(torch.equal(grads[n], grads_c[n]) for n in grads)
    assert saved_c < saved / 2, (saved_c, saved)


def test_copies_stay_checkpointed_and_a_cached_call_runs_as_is():
    model, _ = build_tiny_model("1m")
    checkpoint_layers(model.get_decoder().layers)
    copied = copy.deepcopy(model)
    assert all(is_checkpointed(layer) for layer in copied.get_decoder().layers)
    assert not is_checkpointed(build_tiny_model("1m")[0].get_decoder().layers[0])
    # with a KV cache (generation) the layers run plainly: the cache is written once and the output is the same
    ids = torch.randint(0, 500, (1, 12), generator=torch.Generator().manual_seed(1))
    plain = build_tiny_model("1m")[0].eval()
    with torch.no_grad():
        want = plain.generate(ids, max_new_tokens=5, do_sample=False)
    got = copied.eval().generate(ids, max_new_tokens=5, do_sample=False)
    assert torch.equal(want, got)
