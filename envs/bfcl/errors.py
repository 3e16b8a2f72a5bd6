"""The error every BFCL decoder raises: its own module, so that ``decode`` (Python and fc formats) and
``java_js`` (the tree-sitter parsers that ``decode`` calls) both import it and neither imports the other.
"""


class DecodeError(ValueError):
    """The model output does not decode (BFCL would raise here)."""
