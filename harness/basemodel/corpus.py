"""The text of the base model's corpus: pseudo-names and renaming, copy drills, and the tokenizer.

:mod:`harness.basemodel.build` builds the corpus from the micro world and fits the base on it; this module
holds what turns transcripts into trainable text::

    msgs = rename_entities(traj.messages, random.Random(0), fresh_word)  # names -> new pseudo-words
    drills = copy_drills(100, seed=0, fresh=True)   # the assistant repeats the user's text
    tok = build_base_tokenizer(corpus, 2048)        # BPE trained on the corpus, names left out
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from envs.micro.domains.base import FIRST_NAMES, LAST_NAMES
from envs.micro.world import all_vocab
from harness.basemodel.pretrain import Example, encode_conversation

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["qua", "shi", "tho", "wen", "xo", "yu"]
NAME_POOL_SIZE = 480
"""Pseudo-words that renamed transcripts and copy drills draw from with ``rename_pool="pseudo"``."""


@lru_cache(maxsize=1)
def name_pool() -> tuple[str, ...]:
    """``NAME_POOL_SIZE`` distinct pronounceable lowercase pseudo-words of 2-3 syllables, none a word of
    the world's vocabulary; fixed (seeded), so every corpus and tokenizer shares them."""
    rng, pool = random.Random("name-pool"), dict.fromkeys(())
    while len(pool) < NAME_POOL_SIZE:
        w = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 2, 3))))
        if w not in _vocab_words():
            pool[w] = None
    return tuple(pool)


_ONSETS = ("", "", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z",
           "b", "d", "k", "l", "m", "n", "r", "s", "t", "br", "ch", "cl", "dr", "gr", "pr", "sh", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "au", "ea", "ee", "ia", "io", "ou", "y")
_CODAS = ("n", "r", "s", "l", "m", "k", "t", "x", "ck", "ll", "nd", "ng", "rt", "ss", "st", "tt")

Words = tuple[str, ...] | Callable[[random.Random], str]
"""Where pseudo-names come from: a fixed tuple to choose from, or a function drawing a new one."""


def fresh_word(rng: random.Random) -> str:
    """A new pronounceable lowercase pseudo-word of 3-8 letters (1-3 syllables of onset and vowel, half
    of them closed by a coda), none a word of the world's vocabulary. Tens of thousands are possible, so
    a model cannot learn them by heart as it learns a small pool: only copying predicts them.

    >>> w = fresh_word(random.Random(0)); w.isalpha() and w.islower() and len(w) >= 3
    True
    """
    while True:
        n = rng.choice((1, 1, 2, 2, 2, 3))
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n))
        if rng.random() < 0.5:
            w += rng.choice(_CODAS)
        if 3 <= len(w) <= 8 and w not in _vocab_words():
            return w


def draw_word(rng: random.Random, words: Words | None = None) -> str:
    """One word of ``words`` (default :func:`name_pool`)."""
    if callable(words):
        return words(rng)
    words = words or name_pool()
    return words[rng.randrange(len(words))]


def pseudo_word(rng: random.Random, avoid: set[str] | frozenset[str] = frozenset(),
                pool: Words | None = None) -> str:
    """A random word of ``pool`` (default :func:`name_pool`) not in ``avoid``."""
    while True:
        w = draw_word(rng, pool)
        if w not in avoid:
            return w


@lru_cache(maxsize=1)
def _vocab_words() -> frozenset[str]:
    return frozenset(w.lower() for lst in [FIRST_NAMES, LAST_NAMES, *all_vocab().values()] for e in lst
                     for w in re.findall(r"[A-Za-z]+", e))


@lru_cache(maxsize=1)
def _entry_pattern() -> re.Pattern[str]:
    entries = {e for lst in [FIRST_NAMES, LAST_NAMES, *all_vocab().values()] for e in lst}
    alt = "|".join(re.escape(e) for e in sorted(entries, key=len, reverse=True))
    return re.compile(rf"(?i)\b(?:{alt})\b")


def rename_entities(messages: list[dict[str, Any]], rng: random.Random,
                    pool: Words | None = None) -> list[dict[str, Any]]:
    """``messages`` with every vocabulary entity replaced by words of ``pool`` (default: the pseudo-word
    pool; :func:`fresh_word`: new ones), the same ones wherever it recurs (task text, arguments,
    results, emails); case follows the original, file extensions stay.

    >>> msgs = rename_entities([{"role": "user", "content": "Ada Park: mail ada.park@x.org"}], random.Random(0))
    >>> first, last = msgs[0]["content"].split(":")[0].split()
    >>> msgs[0]["content"].endswith(f"{first.lower()}.{last.lower()}@x.org") and first != "Ada"
    True
    """
    pat = _entry_pattern()
    mapping: dict[str, str] = {}
    used: set[str] = set()

    def new_name(entry: str) -> str:
        stem, dot, ext = entry.partition(".")
        if dot:  # a file name: keep its extension
            return f"{new_name(stem)}.{ext}"
        words = [pseudo_word(rng, used, pool) for _ in stem.split()]
        used.update(words)  # distinct entities stay distinct
        return " ".join(words)

    def sub(m: re.Match[str]) -> str:
        text = m.group(0)
        key = text.lower()
        if key not in mapping:
            mapping[key] = new_name(key)
        out = mapping[key]
        if text[:1].isupper():
            out = " ".join(w[:1].upper() + w[1:] if t[:1].isupper() else w
                           for w, t in zip(out.split(" "), text.split(" ")))
        return out

    out = copy.deepcopy(messages)
    for m in out:
        if isinstance(m.get("content"), str):
            m["content"] = pat.sub(sub, m["content"])
    return out


COPY_DRILL_SYSTEM = "Repeat the user's text exactly."


def copy_drill(rng: random.Random, words: Words | None = None) -> list[dict[str, Any]]:
    """One copy drill: random pseudo-names, ids and words that the assistant repeats verbatim.

    >>> m = copy_drill(random.Random(0))
    >>> [x["role"] for x in m], m[1]["content"] == m[2]["content"]
    (['system', 'user', 'assistant'], True)
    """
    parts = []
    for _ in range(rng.randint(2, 6)):
        r = rng.random()
        if r < 0.4:
            parts.append(f"{draw_word(rng, words).capitalize()} {draw_word(rng, words).capitalize()}")
        elif r < 0.75:
            parts.append(f"{rng.choice('ABCDEFKLMOPRTUV')}{rng.randint(100, 999)}")
        else:
            parts.append(draw_word(rng, words))
    text = rng.choice([", ", " ", "; "]).join(parts)
    return [{"role": "system", "content": COPY_DRILL_SYSTEM}, {"role": "user", "content": text},
            {"role": "assistant", "content": text}]


RECALL_DRILL_SYSTEM = "Answer with the values of the keys the user asks for, as JSON."


def recall_drill(rng: random.Random, keys: tuple[str, ...], words: Words | None = None) -> list[dict[str, Any]]:
    """One key-value recall drill: the user gives pairs (as a JSON call or a Python repr result writes
    them) and asks for some keys; the assistant answers with those pairs in JSON. It is the copy the
    world needs: a value found after its key, then written after the same key.

    >>> m = recall_drill(random.Random(1), ("owner", "reason", "title", "day"))
    >>> import json; answer = json.loads(m[2]["content"])
    >>> all(f'{k}": {json.dumps(v)}' in m[1]["content"].replace("'", '"') for k, v in answer.items())
    True
    """
    def value() -> Any:
        r = rng.random()
        if r < 0.45:
            return " ".join(draw_word(rng, words).capitalize() for _ in range(rng.choice((1, 2, 2))))
        if r < 0.8:
            return f"{rng.choice('ABCDEFKLMOPRTUV')}{rng.randint(100, 999)}"
        return rng.randint(1, 999)

    chosen = rng.sample(keys, min(len(keys), rng.randint(2, 5)))
    pairs = {k: value() for k in chosen}
    given = repr(pairs) if rng.random() < 0.5 else json.dumps(pairs, ensure_ascii=False)
    asked = rng.sample(chosen, rng.randint(1, len(chosen)))
    return [{"role": "system", "content": RECALL_DRILL_SYSTEM},
            {"role": "user", "content": f"{given}\nGive {', '.join(asked)}."},
            {"role": "assistant", "content": json.dumps({k: pairs[k] for k in asked}, ensure_ascii=False)}]


def copy_drills(n: int, seed: int = 0, keys: tuple[str, ...] = (), fresh: bool = False) -> list[list[dict[str, Any]]]:
    """``n`` copy drills over the pseudo-word pool (new words from :func:`fresh_word` when ``fresh``);
    with ``keys``, every other one is a :func:`recall_drill` over them."""
    rng = random.Random(f"copy-drills:{seed}")
    words: Words | None = fresh_word if fresh else None
    return [recall_drill(rng, keys, words) if keys and i % 2 else copy_drill(rng, words) for i in range(n)]


_KEY = re.compile(r"""(["'])(\w+)\1: """)


def corpus_keys(corpus: list[dict[str, Any]], min_count: int = 2) -> tuple[str, ...]:
    """Dict keys written in the corpus's calls and results (``"owner": ``, ``'account_id': ``)."""
    counts = Counter(m.group(2) for x in corpus for msg in x["messages"]
                     for m in _KEY.finditer(str(msg.get("content") or "")))
    return tuple(sorted(k for k, c in counts.items() if c >= min_count))


def key_tokens(keys: tuple[str, ...]) -> list[str]:
    """One token per key as JSON and repr write it, with and without the value's opening quote:
    ``"owner": "``, ``"owner": ``, ``'owner': '``, ``'owner': ``. A value then follows the same single
    token wherever its key is written, so copying it is one induction step."""
    return [f"{q}{k}{q}: {v}" for k in keys for q in "\"'" for v in (q, "")]


def corpus_stats(corpus: list[dict[str, Any]]) -> dict[str, Any]:
    kinds = Counter(x["kind"] for x in corpus)
    plain = [x for x in corpus if x["kind"] == "plain"]
    return {
        "items": len(corpus), "kinds": dict(kinds),
        "plain_mean_reward": round(sum(x["reward"] for x in plain) / max(1, len(plain)), 4),
        "plain_followed_procedure": round(sum(x["mistake"] is None for x in plain) / max(1, len(plain)), 4),
    }


def _entity_pattern() -> re.Pattern[str]:
    words: set[str] = set()
    for entries in [FIRST_NAMES, LAST_NAMES, *all_vocab().values()]:
        for entry in entries:
            words.update(w for w in re.findall(r"[A-Za-z]+", entry) if len(w) > 1)
    alt = "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))
    return re.compile(rf"(?i)\b(?:{alt})\b")


def tokenizer_texts(corpus: list[dict[str, Any]]) -> list[str]:
    """Corpus text for the BPE: every message (role line, content), with entity words and digits removed."""
    pat = _entity_pattern()
    out = []
    for x in corpus:
        text = "\n".join(f"{m.get('role')}\n{m.get('content') or ''}" for m in x["messages"])
        out.append(re.sub(r"\d", "", pat.sub("", text)))
    return out


def build_base_tokenizer(corpus: list[dict[str, Any]], vocab_size: int, keys: tuple[str, ...] = ()):
    """The project's tokenizer layout (control tokens first, markup tags last, its chat template,
    ``<|im_end|>`` as eos, ``<|endoftext|>`` as pad), with BPE merges trained on this corpus.

    Unlike :func:`harness.models.build_tokenizer`, merges may cross punctuation (no GPT-2 regex
    split; JSON keys and quotes become one token) and every digit is its own token (ids are
    copied digit by digit): about 30% fewer tokens per transcript. ``keys``: dict keys that get one
    token each (:func:`key_tokens`).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    from harness.models.tokenizer import CONTROL_TOKENS, MARKUP_TOKENS, wrap_tokenizer

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=CONTROL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    raw.train_from_iterator(tokenizer_texts(corpus), trainer=trainer)
    raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in key_tokens(keys)])
    return wrap_tokenizer(raw)


def encode_corpus(tokenizer: Any, corpus: list[dict[str, Any]]) -> list[Example]:
    return [encode_conversation(tokenizer, x["messages"]) for x in corpus]
