"""LiveCodeBench code generation: code_generation_lite loader, sandboxed lcb_runner-exact grader, env."""
