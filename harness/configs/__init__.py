"""Example training configs (package data): ``lopd train --example NAME``."""
