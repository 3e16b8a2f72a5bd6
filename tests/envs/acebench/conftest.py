"""Shared helpers for the ACEBench tests."""

import pytest

from envs.acebench.data import has_acebench

needs_data = pytest.mark.skipif(not has_acebench(), reason="ACEBench data not found; set LOPD_DATA_DIR")


def doc(name, props, required=(), ptype="object"):
    """A function doc in ACEBench's format."""
    return {
        "name": name,
        "description": f"{name} doc",
        "parameters": {"type": ptype, "properties": props, "required": list(required)},
    }
