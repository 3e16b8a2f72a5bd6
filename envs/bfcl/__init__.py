"""BFCL-v3 (Berkeley Function Calling Leaderboard, bfcl-eval 2025.8.6.2) as environments and a verifier.

Modules: ``data`` (lazy loader), ``decode`` and ``java_js`` (BFCL's decoders), ``convert`` (Java/JS
value conversion), ``ast_checker`` (single-turn rules), ``execution`` and ``multi_turn`` (multi-turn
execution and checks), ``scoring`` (per-entry verdicts and official aggregates), ``prompts``,
``env`` (Gymnasium envs), ``replay`` (ground-truth outputs). See docs/BFCL.md.
"""
