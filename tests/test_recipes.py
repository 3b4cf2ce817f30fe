"""Split-recipe invariants: counts, fraction ranges, label sets, seed use, deletion stability, and
members drawn per text view (or paired)."""

import math
from collections import Counter

import pytest

from tecb_data import seeding
from tecb_data.recipes import Item, blurbs_splits, tenkgnad_splits

TOPS = ["Krimi-Welt", "Ratgeber", "Sachbuch"]


def blurbs_items(n=300):
    items = []
    for i in range(n):
        top = TOPS[i % 3]
        fine = None if i % 10 == 0 else f"{top}-{i % 4}"
        items.append(Item(f"{i:05d}", {"s2s": f"t{i}", "p2p": f"t{i} b{i}"}, {"top": top, "fine": fine}))
    return items


def tenkgnad_items(n=500):
    return [Item(f"{i}", {"s2s": "x", "p2p": "y"}, {"category": f"c{i % 9}"}) for i in range(n)]


# None: one set of members for every view (--paired); a view name: that view's own draw.
MODES = [None, "s2s", "p2p"]


def test_blurbs_recipe_has_28_splits_with_the_right_labels_and_sizes():
    items = blurbs_items()
    splits = blurbs_splits(items, seed=42)
    names = [s.name for s in splits]
    assert names == [f"coarse-{i:02d}" for i in range(10)] + [f"fine-{i:02d}" for i in range(10)] + [
        f"within-{t}" for t in TOPS
    ]
    with_fine = [it for it in items if it.labels["fine"]]
    for split in splits:
        assert len(set(split.ids)) == len(split.ids)
        members = {it.id: it for it in items if it.id in set(split.ids)}
        if split.name.startswith("coarse"):
            assert math.ceil(0.1 * len(items)) <= len(split.ids) <= len(items)
            assert split.labels == tuple(members[i].labels["top"] for i in split.ids)
        elif split.name.startswith("fine"):
            assert math.ceil(0.1 * len(with_fine)) <= len(split.ids) <= len(with_fine)
            assert split.labels == tuple(members[i].labels["fine"] for i in split.ids)
        else:
            top = split.name.removeprefix("within-")
            assert set(split.ids) == {it.id for it in with_fine if it.labels["top"] == top}
            assert split.labels == tuple(members[i].labels["fine"] for i in split.ids)
    sizes = [len(s.ids) for s in splits[:10]]
    assert len(set(sizes)) > 5, "sizes are drawn per split"


def test_fractions_span_ten_to_hundred_percent_over_many_seeds():
    items = blurbs_items(1000)
    fractions = [len(s.ids) / 1000 for seed in range(30) for s in blurbs_splits(items, seed)[:10]]
    assert min(fractions) >= 0.1 and max(fractions) <= 1.0
    assert min(fractions) < 0.2 and max(fractions) > 0.9


@pytest.mark.parametrize("view", MODES)
@pytest.mark.parametrize("recipe, make_items", [(blurbs_splits, blurbs_items), (tenkgnad_splits, tenkgnad_items)])
def test_same_seed_same_splits_other_seed_other_splits_whatever_the_input_order(recipe, make_items, view):
    items = make_items()
    assert recipe(items, 42, view) == recipe(list(reversed(items)), 42, view)
    assert recipe(items, 42, view) != recipe(items, 43, view)


@pytest.mark.parametrize("view", MODES)
@pytest.mark.parametrize("recipe, make_items", [(blurbs_splits, blurbs_items), (tenkgnad_splits, tenkgnad_items)])
def test_removing_one_record_does_not_reshuffle_the_others(recipe, make_items, view):
    items = make_items()
    before = recipe(items, 42, view)
    removed = before[0].ids[3]
    after = recipe([it for it in items if it.id != removed], 42, view)
    assert [s.name for s in before] == [s.name for s in after]
    for old, new in zip(before, after):
        kept = [i for i in old.ids if i != removed]
        # the survivors keep their relative order; at most one record enters at the end of a sample
        assert list(new.ids[: len(kept)]) == kept[: len(new.ids)]
        assert len(new.ids) - len(kept) in (-1, 0, 1)


@pytest.mark.parametrize("recipe, make_items", [(blurbs_splits, blurbs_items), (tenkgnad_splits, tenkgnad_items)])
def test_each_view_draws_its_own_members_with_the_same_split_sizes(recipe, make_items):
    """As published: MTEB's BlurbsClusteringS2S/P2P (and TenKGnad) have equal totals but other per-label counts."""
    items = make_items()
    s2s, p2p = recipe(items, 42, "s2s"), recipe(items, 42, "p2p")
    assert [(s.name, s.level, len(s.ids)) for s in s2s] == [(s.name, s.level, len(s.ids)) for s in p2p]
    sampled = [(a, b) for a, b in zip(s2s, p2p) if not a.name.startswith("within-")]
    pool = {s.level: sum(1 for it in items if it.labels.get(s.level)) for s in s2s}
    for a, b in sampled:
        if len(a.ids) < pool[a.level]:
            assert set(a.ids) != set(b.ids), a.name
    assert any(Counter(a.labels) != Counter(b.labels) for a, b in sampled)
    for a, b in zip(s2s, p2p):
        if a.name.startswith("within-"):  # every book of the genre: the same members, in another order
            assert set(a.ids) == set(b.ids)
    # the paired draw is a third one, and the same whichever view asks for it
    paired = recipe(items, 42)
    assert paired == recipe(items, 42, None) and paired != s2s and paired != p2p
    assert [len(s.ids) for s in paired] == [len(s.ids) for s in s2s]


def test_splits_with_fewer_than_two_labels_are_dropped():
    items = [Item(str(i), {"s2s": "x"}, {"top": "A" if i % 2 else "B", "fine": "only"}) for i in range(40)]
    names = [s.name for s in blurbs_splits(items, 1)]
    assert not any(n.startswith(("fine", "within")) for n in names)
    assert len(names) == 10


@pytest.mark.parametrize("view", MODES)
def test_tenkgnad_recipe_ten_samples_of_at_least_ten_percent(view):
    items = tenkgnad_items()
    splits = tenkgnad_splits(items, 42, view)
    assert [s.name for s in splits] == [f"sample-{i:02d}" for i in range(10)]
    assert all(50 <= len(s.ids) <= 500 for s in splits)
    assert all(set(s.labels) <= {f"c{i}" for i in range(9)} for s in splits)


def test_seeding_is_named_not_positional():
    a = seeding.rng(42, "blurbs", "coarse-00").random()
    assert a == seeding.rng(42, "blurbs", "coarse-00").random()
    assert a != seeding.rng(42, "blurbs", "coarse-01").random()
    assert seeding.hash_key(42, "x") != seeding.hash_key(42, "y")
    with pytest.raises(ValueError):
        seeding.rng(-1, "x")
