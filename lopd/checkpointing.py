"""Activation checkpointing of decoder layers: each layer keeps only its input and recomputes the rest
in the backward pass (``model.gradient_checkpointing``).

    >>> from harness.models import build_tiny_model
    >>> model, _ = build_tiny_model("1m")
    >>> checkpoint_layers(model.get_decoder().layers)
    >>> is_checkpointed(model.get_decoder().layers[0])
    True

Unlike transformers' ``gradient_checkpointing_enable``, it does not depend on ``module.training`` (the
composer's frozen teacher runs in eval mode with gradients to its latents) and never drops a KV cache
silently: a layer called with a cache runs as is, since its recompute would write that cache twice. The
recompute runs with the layer's peft adapters switched as they were in the forward (the composer's teacher
runs its LoRA'd backbone with the adapter off, and the backward comes after that context has ended). The
flag is the layer's class, so ``copy.deepcopy`` (frozen copies, FSDP's template) keeps it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

_CACHE_KWARGS = ("cache", "past_key_values", "past_key_value", "layer_past")
_SUBCLASSES: dict[type, type] = {}


def _has_cache(kwargs: dict[str, Any]) -> bool:
    return any(kwargs.get(k) is not None for k in _CACHE_KWARGS)


@contextlib.contextmanager
def _switched(switches: list[nn.Module], states: list[bool]) -> Iterator[None]:
    """peft tuner layers' ``_disable_adapters`` set to ``states`` inside, restored after (set directly:
    peft's ``enable_adapters`` would also change requires_grad)."""
    before = [m._disable_adapters for m in switches]
    for m, s in zip(switches, states):
        m._disable_adapters = s
    try:
        yield
    finally:
        for m, s in zip(switches, before):
            m._disable_adapters = s


def _checkpointed_class(cls: type) -> type:
    if cls not in _SUBCLASSES:
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            inner = super(sub, self).forward
            if not torch.is_grad_enabled() or _has_cache(kwargs):
                return inner(*args, **kwargs)
            switches = [m for m in self.modules() if hasattr(m, "_disable_adapters")]  # peft's, if any
            states = [m._disable_adapters for m in switches]
            return checkpoint(inner, *args, use_reentrant=False, **kwargs,
                              context_fn=lambda: (contextlib.nullcontext(), _switched(switches, states)))

        sub = type(f"Checkpointed{cls.__name__}", (cls,), {"forward": forward, "__module__": __name__})
        sub._lopd_checkpointed = True
        _SUBCLASSES[cls] = sub
    return _SUBCLASSES[cls]


def checkpoint_layers(layers: Iterable[nn.Module]) -> None:
    """Make every module of ``layers`` (a decoder's ``layers``) recompute its activations in the backward.
    Idempotent; weights, state-dict keys and results are unchanged."""
    for layer in layers:
        if not is_checkpointed(layer):
            layer.__class__ = _checkpointed_class(type(layer))


def is_checkpointed(module: nn.Module) -> bool:
    return getattr(type(module), "_lopd_checkpointed", False)
