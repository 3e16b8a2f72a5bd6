"""The paper's recipes at Qwen3-4B/8B for one 8-GPU node (each file's header names its sources); try one with
``lopd train harness/configs/paper/<name>.yaml --dry-run model.num_hidden_layers=2``."""
