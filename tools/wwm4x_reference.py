"""Record what transformers 4.x's ``DataCollatorForWholeWordMask`` does to real texts: the referee for
the ``paper`` profile's classic whole word masking (tecb_eval/pretraining/wwm.py,
tests/test_fidelity_wwm.py).

transformers 5 no longer ships the collator, so it runs in a throw-away virtualenv::

    python3.11 -m venv /tmp/tf4venv
    /tmp/tf4venv/bin/pip install torch==2.13.0 "transformers>=4.46,<5"
    /tmp/tf4venv/bin/python tools/wwm4x_reference.py ../shared/data/germeval2019/blurbs_dev.txt.gz \
        tests/data/wwm_transformers4.json

What is recorded, per text of each data set (the GermEval 2019 dev set, given on the command line, and
the package's embedded demo sample, which CI has):

- ``word_of``: per token position, the index of the word candidate the collator put it in (-1: no
  word, ``[CLS]``/``[SEP]``), and ``order``, the order its shuffle put those words in. Both are read off the collator's ``_shuffle`` call (the method
  is wrapped to observe its argument and result; what it returns is untouched);
- ``predicted``: the positions whose label is not -100 in the collator's batch;
- ``outcome``: per predicted position, ``m`` (became ``[MASK]``), ``r`` (another token) or ``k`` (kept);
- ``ids_sha256``: a hash of the text's input ids, so the test knows it tokenized the same way.

The texts themselves are not written (the data's licence keeps them in ../shared); the test reads
them again by ISBN with tecb_data's reader. The collator runs without its ``seed`` argument, as in
the authors' 2023 scripts (the transformers of that time had none): Python's ``random.shuffle``
orders the words and torch's global generator draws the 80/10/10 replacement; both are seeded as
transformers' ``set_seed`` seeds them. The tiny WordPiece vocabulary (made here from the titles,
``[UNK]`` for rare characters) is written into the fixture, so words of several pieces, and special
tokens inside texts, both occur often. Running this script again writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = 42
MLM_PROBABILITY = 0.15
BATCH_SIZE = 32  # the authors' per-device batch
MAX_LENGTH = 128  # long enough for budgets of up to ~19 tokens, short enough for a small fixture
P2P_BOOKS = 300  # title + blurb of the first books by ISBN; every title
VOCAB_SIZE = 300
LIMIT_ALPHABET = 60
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def ids_sha256(ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def texts_of(path: Path) -> list[tuple[str, str, str]]:
    """(isbn, view, text) for every labelled book, S2S (title) then P2P (title + blurb), by ISBN."""
    sys.path.insert(0, str(REPO))
    from tecb_data.sources import blurbs

    books, _, _ = blurbs.read_books(path)
    items, _ = blurbs.select(books)
    return ([(item.id, "s2s", item.views["s2s"]) for item in items]
            + [(item.id, "p2p", item.views["p2p"]) for item in items[:P2P_BOOKS]])


def make_vocab(titles: list[str]) -> list[str]:
    """A tiny WordPiece vocabulary, the same on every run (ties broken by the token itself; the
    tokenizers trainer breaks ties differently from run to run): the most frequent characters, each
    also as a ``##`` continuation, then the most frequent whole words. Other characters are
    ``[UNK]``; other words split into character pieces."""
    import re
    from collections import Counter

    chars = Counter(c for t in titles for c in t if not c.isspace())
    alphabet = sorted(sorted(chars, key=lambda c: (-chars[c], c))[:LIMIT_ALPHABET])
    words = Counter(w for t in titles for w in re.findall(r"\w+", t) if len(w) > 1)
    room = VOCAB_SIZE - len(SPECIAL) - 2 * len(alphabet)
    frequent = sorted(w for w in sorted(words, key=lambda w: (-words[w], w))[:room])
    return SPECIAL + alphabet + ["##" + c for c in alphabet] + frequent


def make_tokenizer(vocab: list[str], folder: Path):
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=False)


def word_of(groups: list[list[int]], width: int) -> list[int]:
    positions = [-1] * width
    for k, group in enumerate(groups):
        for i in group:
            positions[i] = k
    return positions


def record(collator, tokenizer, texts: list[tuple[str, str, str]]) -> list[dict]:
    import torch

    observed: list[tuple[list, list]] = []
    shuffle = collator._shuffle

    def observing_shuffle(cand_indexes):
        before = [list(group) for group in cand_indexes]
        after = shuffle(cand_indexes)
        observed.append((before, [list(group) for group in after]))
        return after

    collator._shuffle = observing_shuffle
    rows = []
    for start in range(0, len(texts), BATCH_SIZE):
        chunk = texts[start:start + BATCH_SIZE]
        encoded = tokenizer([t for _, _, t in chunk], truncation=True, max_length=MAX_LENGTH)["input_ids"]
        observed.clear()
        batch = collator([{"input_ids": ids} for ids in encoded])
        assert sorted(batch.keys()) == ["input_ids", "labels"], batch.keys()
        assert len(observed) == len(chunk)
        for (isbn, view, _), ids, (groups, shuffled), inputs, labels in zip(
                chunk, encoded, observed, batch["input_ids"], batch["labels"]):
            width = len(ids)
            assert bool((labels[width:] == -100).all())  # padding is never predicted
            predicted = [int(i) for i in torch.nonzero(labels[:width] != -100).flatten()]
            outcome = "".join(
                "m" if int(inputs[i]) == tokenizer.mask_token_id else ("k" if int(inputs[i]) == ids[i] else "r")
                for i in predicted)
            rows.append({
                "isbn": isbn, "view": view, "n_tokens": width, "ids_sha256": ids_sha256(ids),
                "word_of": word_of(groups, width), "order": [groups.index(g) for g in shuffled],
                "predicted": predicted, "outcome": outcome,
            })
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: wwm4x_reference.py BLURBS_DEV_FILE OUTPUT.json", file=sys.stderr)
        return 2
    import tokenizers
    import torch
    import transformers
    from transformers import DataCollatorForWholeWordMask

    if int(transformers.__version__.split(".")[0]) != 4:
        print(f"this needs transformers 4.x, found {transformers.__version__}; see this script's docstring",
              file=sys.stderr)
        return 1
    dev_file, out = Path(argv[0]), Path(argv[1])
    sets = {"dev": texts_of(dev_file), "demo": texts_of(REPO / "tecb_data" / "demo" / "blurbs")}
    vocab = make_vocab([t for _, view, t in sets["dev"] if view == "s2s"])
    tokenizer = make_tokenizer(vocab, out.parent / f".wwm4x-vocab.{os.getpid()}")
    document = {
        "about": "transformers 4.x DataCollatorForWholeWordMask (no seed argument: random.shuffle orders the "
                 "words, torch's global generator draws 80/10/10) on Blurbs texts through a tiny WordPiece "
                 "vocabulary; written by tools/wwm4x_reference.py",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "tokenizers": tokenizers.__version__, "python": sys.version.split()[0],
        "seed": SEED, "mlm_probability": MLM_PROBABILITY, "batch_size": BATCH_SIZE, "max_length": MAX_LENGTH,
        "vocab": vocab, "datasets": {},
    }
    for name, texts in sets.items():
        random.seed(SEED)  # what transformers.set_seed does for these two generators
        torch.manual_seed(SEED)
        collator = DataCollatorForWholeWordMask(tokenizer, mlm=True, mlm_probability=MLM_PROBABILITY)
        document["datasets"][name] = {"source": dev_file.name if name == "dev" else "tecb_data/demo/blurbs",
                                      "texts": record(collator, tokenizer, texts)}
    for child in (out.parent / f".wwm4x-vocab.{os.getpid()}").iterdir():
        child.unlink()
    (out.parent / f".wwm4x-vocab.{os.getpid()}").rmdir()
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(out)
    print(f"wrote {out}: " + ", ".join(f"{k} ({len(v['texts'])} texts, "
                                       f"{sum(len(r['predicted']) for r in v['texts'])} predicted tokens)"
                                       for k, v in document["datasets"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
