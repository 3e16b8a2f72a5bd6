"""Turn trace files into experiences: training split only, reward >= threshold, deduplicated.

>>> from lopd.bank import BankConfig
>>> report = IngestReport()
>>> exps = list(experiences_from_traces(["runs/a/traces.jsonl"], BankConfig(), report))  # doctest: +SKIP
>>> report.summary()                                                                  # doctest: +SKIP
'3 file(s), 120 episode(s): kept 41; skipped 60 below min_reward, 12 non-training split, ...'

Split hygiene is enforced here AND again when experiences are added to a bank
(:func:`check_split`), so evaluation tasks cannot enter through any door.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.trace import Episode, TraceError

from lopd.bank.config import EVAL_SPLIT_NAMES, BankConfig
from lopd.bank.experience import Experience, SourceRef
from lopd.bank.render import render_episode


class SplitError(ValueError):
    """An attempt to put a non-training (e.g. evaluation) episode into the bank."""


@dataclass
class IngestReport:
    """What happened to every episode offered to the bank."""

    files: int = 0
    episodes: int = 0
    kept: int = 0
    skipped_split: int = 0
    """Episodes from a non-training split (never ingested)."""
    skipped_reward: int = 0
    skipped_duplicate: int = 0
    skipped_no_task: int = 0
    """Episodes whose messages carry no user task text."""
    errors: list[str] = field(default_factory=list)
    """Unreadable trace lines (file:line: reason) when on_trace_error='skip'."""

    def summary(self) -> str:
        return (f"{self.files} file(s), {self.episodes} episode(s): kept {self.kept}; skipped "
                f"{self.skipped_reward} below min_reward, {self.skipped_split} non-training split, "
                f"{self.skipped_duplicate} duplicate, {self.skipped_no_task} without task text, "
                f"{len(self.errors)} unreadable line(s)")

    def merge(self, other: IngestReport) -> None:
        for name in ("files", "episodes", "kept", "skipped_split", "skipped_reward", "skipped_duplicate",
                     "skipped_no_task"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)


def is_training_split(split: str, cfg: BankConfig) -> bool:
    return split in cfg.train_splits and split.lower() not in EVAL_SPLIT_NAMES


def check_split(exp: Experience, cfg: BankConfig) -> None:
    """Raise :class:`SplitError` unless ``exp`` comes from a training split."""
    if not is_training_split(exp.split, cfg):
        raise SplitError(f"experience {exp.env_id}/{exp.task_id} from {exp.source} is from split "
                         f"{exp.split!r}; the bank takes only {cfg.train_splits}")


def read_numbered(path: str | os.PathLike, on_error: str, report: IngestReport) -> Iterator[tuple[Episode, SourceRef]]:
    """Episodes of one JSONL trace file with their file/line reference (envs.trace format)."""
    resolved = str(Path(path).resolve())
    index = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                ep = Episode.from_json(raw.decode("utf-8"))
            except (ValueError, TypeError, RecursionError) as e:
                err = TraceError(path, lineno, f"{type(e).__name__}: {e}"[:500])
                if on_error == "raise":
                    raise err from None
                report.errors.append(str(err))
                continue
            yield ep, SourceRef(resolved, lineno, index)
            index += 1


@functools.lru_cache(maxsize=4)
def _template_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def chat_template_text(ep: Episode, tokenizer_path: str) -> str:
    """The episode's stored conversation (and tools) through the tokenizer's chat template."""
    tok = _template_tokenizer(tokenizer_path)
    return tok.apply_chat_template(ep.messages, tools=ep.tools or None, tokenize=False)


def to_experience(ep: Episode, source: SourceRef, cfg: BankConfig) -> Experience | None:
    """Render one episode (None when it has no task text). Does not filter by split or reward."""
    task, trajectory = render_episode(ep, observation_chars=cfg.observation_chars,
                                      response_chars=cfg.response_chars, keep_reasoning=cfg.keep_reasoning,
                                      executed_calls_only=cfg.executed_calls_only)
    if task is None:
        return None
    meta = {"steps": len(ep.steps), "tool_calls": ep.n_tool_calls, "seed": ep.seed}
    if cfg.render == "chat_template":
        if not cfg.template_tokenizer:
            raise ValueError("bank render='chat_template' needs template_tokenizer (a tokenizer folder)")
        trajectory, meta["render"] = chat_template_text(ep, str(cfg.template_tokenizer)), "chat_template"
    return Experience(env_id=ep.env_id, task_id=str(ep.task_id), reward=float(ep.reward), split=ep.split,
                      task=task, trajectory=trajectory, source=source, meta=meta)


def select(pairs: Iterable[tuple[Episode, SourceRef]], cfg: BankConfig, report: IngestReport,
           seen: set[str]) -> Iterator[Experience]:
    """Filter and render episodes; ``seen`` holds the keys already in the bank and grows."""
    for ep, src in pairs:
        report.episodes += 1
        if not isinstance(ep.split, str) or not is_training_split(ep.split, cfg):
            report.skipped_split += 1
            continue
        if not isinstance(ep.reward, (int, float)) or not ep.reward >= cfg.min_reward:  # NaN fails too
            report.skipped_reward += 1
            continue
        exp = to_experience(ep, src, cfg)
        if exp is None:
            report.skipped_no_task += 1
            continue
        if exp.key in seen:
            report.skipped_duplicate += 1
            continue
        seen.add(exp.key)
        report.kept += 1
        yield exp


def experiences_from_traces(paths: Iterable[str | os.PathLike], cfg: BankConfig, report: IngestReport,
                            seen: set[str] | None = None) -> Iterator[Experience]:
    """Stream the experiences worth keeping from trace files, in file and line order."""
    seen = set() if seen is None else seen
    for path in paths:
        report.files += 1
        yield from select(read_numbered(path, cfg.on_trace_error, report), cfg, report, seen)


def experiences_from_episodes(episodes: Iterable[Episode], cfg: BankConfig, report: IngestReport,
                              seen: set[str] | None = None, label: str = "<memory>") -> Iterator[Experience]:
    """The same for in-memory episodes (e.g. a learner's fresh rollouts); ``label`` names the source."""
    seen = set() if seen is None else seen
    pairs = ((ep, SourceRef(label, None, i)) for i, ep in enumerate(episodes))
    yield from select(pairs, cfg, report, seen)
