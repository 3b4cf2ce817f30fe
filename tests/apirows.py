"""Results rows of a model behind a paid API, made from a store's rows: the report, table and
recommend tests compare such a model with one that runs here without calling any endpoint."""

from __future__ import annotations

API_IDENTITY = "openai:text-embedding-3-small@https://api.example.invalid/v1|dimensions=native"
PRICE = 0.02  # per million tokens


def split_tokens(split: str) -> float:
    """A split's tokens, different per split, so that a sum over splits is told from a mean."""
    return 1000.0 + 10 * sum(split.encode("utf-8"))


def api_copy(rows: list[dict], name: str, *, price: float | None = PRICE, shift: float = 0.0) -> list[dict]:
    """``rows`` as the rows of ``name``, an API model: its identity, each split's tokens and (with a
    ``price``) their cost; every score that needs labels moved by ``shift`` (0: tied with the original)."""
    out = []
    for row in rows:
        copy = {**row, "model": name, "model_identity": API_IDENTITY, "api_tokens": split_tokens(row["split"]),
                "api_key_env": "TECB_TEST_KEY"}
        if price is not None:
            copy.update(api_cost=copy["api_tokens"] * price / 1e6, price_per_million_tokens=price)
        for field in ("v_measure", "ami", "ari"):
            if copy.get(field) is not None:
                copy[field] = min(1.0, max(-1.0, copy[field] + shift))
        out.append(copy)
    return out
