"""EvalPlus (HumanEval+ v0.1.10, MBPP+ v0.2.0): data, sandboxed verifier and environments."""
