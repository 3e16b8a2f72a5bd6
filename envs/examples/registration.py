from envs.registry import register_env

register_env("lopd/shop-v0", "envs.examples.shop:ShopEnv")
