from envs.registry import register_env

register_env("lopd/mcp-v0", "envs.mcp.env:McpEnv")
