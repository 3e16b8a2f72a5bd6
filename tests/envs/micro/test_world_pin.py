"""The micro world's output pinned: the default world's records and the scripted expert's episodes on it hash to
a recorded digest.

The pinned base (harness/pinned_base/) was trained on exactly this world. Its staleness check compares the
world code's fingerprint (a hash of the source), which any edit changes; this digest is what the code makes.
A refactor of the world that keeps the digest may re-stamp ``world_fingerprint`` in the pinned base's
``base_info.json``; one that changes it must re-pin the base (``make pin-base``) and record the new digest.
"""

import hashlib
import json
import tempfile

WORLD_DIGEST = "86cfdc691f1ba2f9d5c9e64ba451e3ff4c86cb476e8da5655d23e02989d63002"
"""sha256 of :func:`world_output` before the domains' task-making was factored (issue #30)."""


def world_output() -> bytes:
    """The default world (seed 0, 600 train, 120 eval tasks) and the expert's episode on every 10th task."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.micro.expert import run_solver
    from envs.micro.world import generate_world

    records, scenarios = generate_world(0, 600, 120)
    env = gym.make("lopd/micro-v0", seed=0, n_train=600, n_eval=120, prompt="compact",
                   cache_dir=tempfile.mkdtemp()).unwrapped
    runs = []
    for t in env.all_tasks()[::10]:
        traj = run_solver(env, t.task_id)
        runs.append({"task": t.task_id, "reward": traj.reward, "messages": traj.messages, "schemas": env.tools.schemas})
    return json.dumps([records, scenarios, runs], sort_keys=True, default=repr).encode()


def test_the_default_world_is_the_one_the_pinned_base_was_trained_on():
    assert hashlib.sha256(world_output()).hexdigest() == WORLD_DIGEST
