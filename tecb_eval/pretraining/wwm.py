"""Whole word masking: masked language modelling where every sub-token of a chosen word is masked."""

from __future__ import annotations

from pathlib import Path

from tecb_data import seeding
from tecb_data.errors import UserError
from tecb_eval.pretraining.settings import PretrainSettings


class WholeWordMasking:
    """The model with an MLM head (initialised when the checkpoint has none) and the
    transformers whole-word-masking collator, seeded from the run's seed."""

    name = "wwm"

    def __init__(self, folder: Path, settings: PretrainSettings, seed: int, device: str):
        from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        # The collator finds word boundaries from character offsets, which only fast tokenizers give.
        if not self.tokenizer.is_fast:
            raise UserError(f"{folder}: whole word masking needs a fast tokenizer (a tokenizer.json); this model has a slow one")
        if self.tokenizer.mask_token is None:
            raise UserError(f"{folder}: the tokenizer has no mask token, so the model cannot be trained by masking")
        self.module = AutoModelForMaskedLM.from_pretrained(str(folder)).to(device)
        self.encoder = self.module.base_model
        self.max_length = settings.max_length
        mask_seed = int(seeding.seed_sequence(seed, "pretrain", "wwm", "mask").generate_state(1)[0])
        # transformers 5 masks whole words only by [MASK] (it has no random-word replacement for
        # them); saying so explicitly keeps it from warning on every run.
        self.collator = DataCollatorForLanguageModeling(
            self.tokenizer, mlm=True, whole_word_mask=True, mlm_probability=settings.mlm_probability,
            mask_replace_prob=1.0, random_replace_prob=0.0, seed=mask_seed,
        )

    def make_batch(self, texts: list[str]) -> dict:
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length,
            return_offsets_mapping=True, return_special_tokens_mask=True,
        )
        # Padded here, whole batch at once: tokenizer.pad inside the collator cannot pad offsets.
        examples = [{key: encoded[key][i] for key in encoded.keys()} for i in range(len(texts))]
        return dict(self.collator(examples))

    def loss(self, batch: dict):
        # A batch of short texts can draw no mask at all; its loss would be 0/0.
        if not bool((batch["labels"] != -100).any()):
            return None
        return self.module(**batch).loss

    def save(self, folder: Path) -> None:
        self.module.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
