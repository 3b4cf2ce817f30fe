"""Declarative dataset definitions and the seeded split recipes of the benchmark.

A dataset is data: one frozen :class:`DatasetSpec` per published dataset, in :data:`DATASETS`.
A recipe turns a source's normalized :class:`Item` list into named splits, once per text view: S2S
and P2P get the same split sizes but draw their members independently, as the published datasets did
(equal total samples, different per-label counts in MTEB's statistics of BlurbsClustering and
TenKGnadClustering). ``view=None`` draws one set of members for every view ("paired").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

from tecb_data import seeding


@dataclass(frozen=True)
class Item:
    """One source record after parsing and selection, ready to be split."""

    id: str
    views: Mapping[str, str]  # text per view name ("s2s", "p2p")
    labels: Mapping[str, str | None]  # label per labelling level ("top", "fine", "category", ...)
    path: tuple[str, ...] = ()  # full genre / category path(s), for provenance


@dataclass(frozen=True)
class Split:
    name: str
    level: str  # which of Item.labels this split clusters on
    ids: tuple[str, ...]  # members, in published row order
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Recipe:
    name: str
    version: str
    description: str  # one paragraph, rendered into the dataset card
    make_splits: Callable[..., list[Split]]  # (items, seed, view=None); view None: paired members
    params: Mapping[str, object] = field(default_factory=dict)  # "members": the default MEMBERS_* mode


MEMBERS_PER_VIEW = "per-view"  # each text view draws its own split members
MEMBERS_PAIRED = "paired"  # one set of split members for every view of a source


def _members_key(seed: int, family: str, name: str, view: str | None) -> bytes:
    # Without a view the key is the one recipe version 1 used for both views, so a paired build
    # reproduces the data of a version-1 build byte for byte.
    if view is None:
        return seeding.hash_key(seed, family, name)
    return seeding.hash_key(seed, family, "view", view, name)


def _sampled_split(
    items: list[Item], level: str, name: str, seed: int, family: str, min_fraction: float, view: str | None,
    max_fraction: float = 1.0,
) -> Split:
    """A seeded random sample of the items labelled at ``level``, in keyed-hash order."""
    labelled = {it.id: it.labels[level] for it in items if it.labels.get(level)}
    # The size is drawn per split, not per view: the published S2S and P2P datasets have equal
    # totals (174,637 Blurbs and 45,914 TenKGnad samples in both), only their members differ.
    size = seeding.draw_size(seeding.rng(seed, family, name, "size"), len(labelled), min_fraction, max_fraction)
    order = seeding.keyed_order(sorted(labelled), _members_key(seed, family, name, view))[:size]
    return Split(name, level, tuple(order), tuple(labelled[i] for i in order))


def _full_split(items: list[Item], level: str, name: str, seed: int, family: str, keep, view: str | None) -> Split:
    labelled = {it.id: it.labels[level] for it in items if it.labels.get(level) and keep(it)}
    order = seeding.keyed_order(sorted(labelled), _members_key(seed, family, name, view))
    return Split(name, level, tuple(order), tuple(labelled[i] for i in order))


def _meaningful(split: Split) -> bool:
    # A split with fewer than two labels cannot be scored by V-measure in any useful way.
    return len(split.ids) >= 2 and len(set(split.labels)) >= 2


BLURBS_SAMPLED = 10
BLURBS_MIN_FRACTION = 0.1


def blurbs_splits(items: list[Item], seed: int, view: str | None = None) -> list[Split]:
    """28 splits on the full corpus: 10 coarse (top-level genre), 10 fine (second-level genre),
    one per top-level genre (its second-level genres); the sampled ones hold 10-100 % of the books.
    ``view`` names the text view that draws its own members; None draws one set for all views."""
    splits = [
        _sampled_split(items, "top", f"coarse-{i:02d}", seed, "blurbs", BLURBS_MIN_FRACTION, view)
        for i in range(BLURBS_SAMPLED)
    ]
    splits += [
        _sampled_split(items, "fine", f"fine-{i:02d}", seed, "blurbs", BLURBS_MIN_FRACTION, view)
        for i in range(BLURBS_SAMPLED)
    ]
    tops = sorted({it.labels["top"] for it in items})
    splits += [
        _full_split(items, "fine", f"within-{top}", seed, "blurbs", lambda it, top=top: it.labels["top"] == top, view)
        for top in tops
    ]
    return [s for s in splits if _meaningful(s)]


TENKGNAD_SPLITS = 10
TENKGNAD_MIN_FRACTION = 0.1


def tenkgnad_splits(items: list[Item], seed: int, view: str | None = None) -> list[Split]:
    """10 splits, each a seeded random sample of at least 10 % of the articles (like MTEB's
    TwentyNewsgroupsClustering). ``view`` as for :func:`blurbs_splits`."""
    splits = [
        _sampled_split(items, "category", f"sample-{i:02d}", seed, "tenkgnad", TENKGNAD_MIN_FRACTION, view)
        for i in range(TENKGNAD_SPLITS)
    ]
    return [s for s in splits if _meaningful(s)]


REDDIT_SPLITS = 10
REDDIT_MIN_SUBREDDITS = 10
REDDIT_MAX_SUBREDDITS = 50


def reddit_subreddit_range(n: int) -> tuple[int, int]:
    """How many of ``n`` subreddits one split takes: 10-50; with 10 or fewer (small tests, small
    collections), between half and all of them, so that the ten splits still differ."""
    high = min(REDDIT_MAX_SUBREDDITS, n)
    low = REDDIT_MIN_SUBREDDITS if n > REDDIT_MIN_SUBREDDITS else max(2, (n + 1) // 2)
    return min(low, high), high


def reddit_splits(items: list[Item], seed: int, subreddits=None) -> list[Split]:
    """10 splits, each every item of a seeded draw of subreddits, labelled by subreddit.

    ``subreddits`` is the list the draws are made from: the subreddits of the whole id list, given
    by the caller so that deleted submissions, even all of one subreddit, change no draw. Each
    draw is the first k of the sorted list in keyed-hash order, and rows are in keyed-hash order
    of their ids: deleting k submissions removes exactly their k rows and moves nothing else.
    """
    universe = sorted(set(subreddits) if subreddits is not None else {it.labels["subreddit"] for it in items})
    low, high = reddit_subreddit_range(len(universe))
    labels = {it.id: it.labels["subreddit"] for it in items}
    splits = []
    for i in range(REDDIT_SPLITS):
        name = f"subreddits-{i:02d}"
        size = int(seeding.rng(seed, "reddit", name, "size").integers(low, high + 1)) if high else 0
        chosen = set(seeding.keyed_order(universe, seeding.hash_key(seed, "reddit", name, "subreddits"))[:size])
        members = seeding.keyed_order(sorted(i for i, s in labels.items() if s in chosen), seeding.hash_key(seed, "reddit", name))
        splits.append(Split(name, "subreddit", tuple(members), tuple(labels[i] for i in members)))
    return [s for s in splits if _meaningful(s)]


RECIPES: dict[str, Recipe] = {
    "blurbs": Recipe(
        name="blurbs",
        # 3: each split row also carries every text's genre path (label_paths: top-level genre, then
        # second-level genre where the book has one), for per-level scores; the splits, texts and
        # labels are version 2's. 2: each text view draws its own members (1: both shared them, now --paired).
        version="3",
        description=(
            "Books with exactly one top-level genre and at most two second-level genres are kept; a book "
            "with two second-level genres is labelled with the one that is less frequent over the whole "
            "corpus (ties broken by name). 28 splits: 10 coarse splits labelled by top-level genre and 10 "
            "fine splits labelled by second-level genre, each a seeded random 10-100 % of the books; and "
            "one split per top-level genre holding all its books, labelled by second-level genre. "
            "The split sizes are the same for the S2S and the P2P dataset. Since recipe version 3 each "
            "split row also holds `label_paths`: every text's genre path (its top-level genre, then its "
            "second-level genre where it has one), so that each level of the hierarchy can be scored; "
            "the splits, texts and labels are those of version 2."
        ),
        make_splits=blurbs_splits,
        params={"sampled_splits_per_level": BLURBS_SAMPLED, "min_fraction": BLURBS_MIN_FRACTION, "members": MEMBERS_PER_VIEW,
                "hierarchy": ["top", "fine"]},
    ),
    "tenkgnad": Recipe(
        name="tenkgnad",
        version="2",  # 2: each text view draws its own members (1: both shared them, now --paired)
        description=(
            "Articles of the nine 10kGNAD categories (the path element after `Newsroom/`). 10 splits, "
            "each a seeded random sample of 10-100 % of the articles, sizes drawn from the seed, the same "
            "for the S2S and the P2P dataset."
        ),
        make_splits=tenkgnad_splits,
        params={"splits": TENKGNAD_SPLITS, "min_fraction": TENKGNAD_MIN_FRACTION, "members": MEMBERS_PER_VIEW},
    ),
    "reddit": Recipe(
        name="reddit",
        version="1",
        description=(
            "Hot and top submissions of German subreddits, rehydrated from their ids; submissions that "
            "Reddit no longer returns, that were deleted or removed, or whose author's account is gone are "
            "dropped. 10 splits, each holding every kept submission of 10-50 subreddits drawn from the seed "
            "over the sorted list of all subreddits of the id list, labelled by subreddit. Subreddits and "
            "rows are chosen and ordered by keyed hashing, so deleting k submissions removes exactly their "
            "k rows and leaves every other row where it was."
        ),
        make_splits=reddit_splits,
        params={
            # The ids dataset publishes one id list per split and both text views are rehydrated
            # from it, so their members are the ids dataset's, never drawn per view.
            "members": MEMBERS_PAIRED,
            "splits": REDDIT_SPLITS,
            "min_subreddits": REDDIT_MIN_SUBREDDITS,
            "max_subreddits": REDDIT_MAX_SUBREDDITS,
        },
    ),
}


BENCHMARK_CITATION = """@inproceedings{wehrli-etal-2023-german,
    title = "German Text Embedding Clustering Benchmark",
    author = "Wehrli, Silvan and Arnrich, Bert and Irrgang, Christopher",
    booktitle = "Proceedings of the 19th Conference on Natural Language Processing (KONVENS 2023)",
    year = "2023",
    address = "Ingolstadt, Germany",
    publisher = "Association for Computational Lingustics",
    pages = "187--201",
}"""

GERMEVAL_CITATION = """@inproceedings{remus-etal-2019-germeval,
    title = "{G}erm{E}val 2019 Task 1: Hierarchical Classification of Blurbs",
    author = "Remus, Steffen and Aly, Rami and Biemann, Chris",
    booktitle = "Proceedings of the 15th Conference on Natural Language Processing (KONVENS 2019)",
    year = "2019",
    address = "Erlangen, Germany",
}"""

OMPC_CITATION = """@inproceedings{schabus-etal-2017-one,
    title = "One Million Posts: A Data Set of German Online Discussions",
    author = "Schabus, Dietmar and Skowron, Marcin and Trapp, Martin",
    booktitle = "Proceedings of the 40th International ACM SIGIR Conference on Research and Development in Information Retrieval",
    year = "2017",
    pages = "1241--1244",
}"""


REDDIT_SOURCE_URL = "https://www.reddit.com/dev/api/#GET_api_info"
REDDIT_LICENSE_NOTE = (
    "The texts belong to their authors and are used under Reddit's Data API Terms "
    "(https://redditinc.com/policies/data-api-terms); only submission ids and subreddit names are published, "
    "and everyone rehydrates them with their own API credentials, so a deleted post stays deleted."
)


@dataclass(frozen=True)
class DatasetSpec:
    """One published dataset: modelled on MTEB's TaskMetadata."""

    name: str
    source: str  # key of tecb_data.build.READERS
    view: str  # "s2s" or "p2p"
    recipe: str  # key of RECIPES
    pretty_name: str
    mteb_name: str  # the MTEB task this dataset backs
    description: str
    license: str  # SPDX-style id the Hub validates
    license_note: str
    source_citations: tuple[str, ...]
    source_url: str
    card_template: str  # file name in cards/
    publishable: bool = True  # False: holds texts that must not be republished


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="blurbs-clustering-s2s",
            source="blurbs",
            view="s2s",
            recipe="blurbs",
            pretty_name="Blurbs Clustering S2S",
            mteb_name="BlurbsClusteringS2S",
            description="Clustering of German book titles by genre.",
            license="cc-by-nc-4.0",
            license_note="GermEval 2019 Task 1 data, CC BY-NC 4.0 (non-commercial research use).",
            source_citations=(GERMEVAL_CITATION,),
            source_url="https://www.inf.uni-hamburg.de/en/inst/ab/lt/resources/data/germeval-2019-hmc.html",
            card_template="blurbs.md.j2",
        ),
        DatasetSpec(
            name="blurbs-clustering-p2p",
            source="blurbs",
            view="p2p",
            recipe="blurbs",
            pretty_name="Blurbs Clustering P2P",
            mteb_name="BlurbsClusteringP2P",
            description="Clustering of German book titles and blurbs by genre.",
            license="cc-by-nc-4.0",
            license_note="GermEval 2019 Task 1 data, CC BY-NC 4.0 (non-commercial research use).",
            source_citations=(GERMEVAL_CITATION,),
            source_url="https://www.inf.uni-hamburg.de/en/inst/ab/lt/resources/data/germeval-2019-hmc.html",
            card_template="blurbs.md.j2",
        ),
        DatasetSpec(
            name="tenkgnad-clustering-s2s",
            source="tenkgnad",
            view="s2s",
            recipe="tenkgnad",
            pretty_name="TenKGnad Clustering S2S",
            mteb_name="TenKGnadClusteringS2S",
            description="Clustering of German news article titles (DER STANDARD) by section.",
            license="cc-by-nc-sa-4.0",
            license_note="One Million Posts Corpus / 10kGNAD, CC BY-NC-SA 4.0.",
            source_citations=(OMPC_CITATION,),
            source_url="https://ofai.github.io/million-post-corpus/",
            card_template="tenkgnad.md.j2",
        ),
        DatasetSpec(
            name="tenkgnad-clustering-p2p",
            source="tenkgnad",
            view="p2p",
            recipe="tenkgnad",
            pretty_name="TenKGnad Clustering P2P",
            mteb_name="TenKGnadClusteringP2P",
            description="Clustering of German news articles (title, subheadline and body) by section.",
            license="cc-by-nc-sa-4.0",
            license_note="One Million Posts Corpus / 10kGNAD, CC BY-NC-SA 4.0.",
            source_citations=(OMPC_CITATION,),
            source_url="https://ofai.github.io/million-post-corpus/",
            card_template="tenkgnad.md.j2",
        ),
        *(
            DatasetSpec(
                name=f"reddit-clustering-{view}",
                source="reddit",
                view=view,
                recipe="reddit",
                pretty_name=f"Reddit Clustering {view.upper()}",
                mteb_name=f"RedditClustering{view.upper()}",
                description=description,
                license="other",
                license_note=REDDIT_LICENSE_NOTE,
                source_citations=(),
                source_url=REDDIT_SOURCE_URL,
                card_template="reddit.md.j2",
                publishable=False,  # texts of Reddit users: built by each user, never republished
            )
            for view, description in (
                ("s2s", "Clustering of German Reddit submission titles by subreddit."),
                ("p2p", "Clustering of German Reddit submissions (title and body) by subreddit."),
            )
        ),
        DatasetSpec(
            name="reddit-clustering-ids",
            source="reddit",
            view="ids",  # no text: submission ids and subreddit labels, rehydrated by the user
            recipe="reddit",
            pretty_name="Reddit Clustering (submission ids)",
            # Not an MTEB task itself: rehydrated, it yields RedditClusteringS2S and RedditClusteringP2P.
            mteb_name="RedditClusteringS2S+RedditClusteringP2P",
            description="Submission ids and subreddit labels of the German Reddit clustering datasets, without any text.",
            license="other",
            license_note=REDDIT_LICENSE_NOTE,
            source_citations=(),
            source_url=REDDIT_SOURCE_URL,
            card_template="reddit-ids.md.j2",
        ),
    )
}


def datasets_of(source: str) -> list[DatasetSpec]:
    return [spec for spec in DATASETS.values() if spec.source == source]


def label_counts(split: Split) -> dict[str, int]:
    return dict(sorted(Counter(split.labels).items()))


# -- the generic table source ---------------------------------------------------------------------
# A labelled table gets one of the two paper recipes, with its split count and fraction range as
# parameters. The draws keep the families and split names of the recipe they follow ("tenkgnad":
# sample-NN; "blurbs": coarse-NN, fine-NN, within-<parent>), so the same records, ids and seed give
# the very splits of the source built with that recipe: that is what the equivalence tests hold.
TABLE_FLAT = "table-flat"
TABLE_HIERARCHICAL = "table-hierarchical"
TABLE_RECIPE_VERSION = "1"


def flat_splits(
    items: list[Item], seed: int, view: str | None = None, *, splits: int = TENKGNAD_SPLITS,
    min_fraction: float = TENKGNAD_MIN_FRACTION, max_fraction: float = 1.0,
) -> list[Split]:
    """:func:`tenkgnad_splits` with its split count and fraction range as parameters (labels at
    level ``category``)."""
    made = [
        _sampled_split(items, "category", f"sample-{i:02d}", seed, "tenkgnad", min_fraction, view, max_fraction)
        for i in range(splits)
    ]
    return [s for s in made if _meaningful(s)]


def hierarchical_splits(
    items: list[Item], seed: int, view: str | None = None, *, splits: int = BLURBS_SAMPLED,
    min_fraction: float = BLURBS_MIN_FRACTION, max_fraction: float = 1.0,
) -> list[Split]:
    """:func:`blurbs_splits` with its count of sampled splits per level and their fraction range as
    parameters (labels at levels ``top``, the parent, and ``fine``, the child)."""
    made = [
        _sampled_split(items, level, f"{prefix}-{i:02d}", seed, "blurbs", min_fraction, view, max_fraction)
        for level, prefix in (("top", "coarse"), ("fine", "fine"))
        for i in range(splits)
    ]
    tops = sorted({it.labels["top"] for it in items})
    made += [
        _full_split(items, "fine", f"within-{top}", seed, "blurbs", lambda it, top=top: it.labels["top"] == top, view)
        for top in tops
    ]
    return [s for s in made if _meaningful(s)]


def table_recipe(hierarchical: bool, *, splits: int | None = None, min_fraction: float | None = None,
                 max_fraction: float = 1.0) -> Recipe:
    """The recipe of a table build: TenKGnad-style for flat labels, Blurbs-style for parent/child
    labels; ``None`` takes the paper's value. Raises ValueError on parameters no recipe can draw."""
    import functools

    splits = (BLURBS_SAMPLED if hierarchical else TENKGNAD_SPLITS) if splits is None else splits
    min_fraction = (BLURBS_MIN_FRACTION if hierarchical else TENKGNAD_MIN_FRACTION) if min_fraction is None else min_fraction
    if isinstance(splits, bool) or not isinstance(splits, int) or splits < 1:
        raise ValueError(f"the split count must be a positive integer, got {splits!r}")
    if not 0 < min_fraction <= max_fraction <= 1:
        raise ValueError(f"the fraction range must satisfy 0 < min <= max <= 1, got {min_fraction}-{max_fraction}")
    span = f"{min_fraction:.0%}-{max_fraction:.0%}" if min_fraction != max_fraction else f"{min_fraction:.0%}"
    if hierarchical:
        description = (
            f"Records labelled with a parent and (optionally) a child label. {splits} coarse splits labelled "
            f"by the parent and {splits} fine splits labelled by the child, each a seeded random {span} of "
            "the records that have that label; and one split per parent holding all its records, labelled by "
            "the child (the Blurbs recipe; splits with fewer than two labels are left out). The split sizes "
            "are the same for the S2S and the P2P dataset."
        )
        make = functools.partial(hierarchical_splits, splits=splits, min_fraction=min_fraction, max_fraction=max_fraction)
        name, family = TABLE_HIERARCHICAL, "blurbs"
    else:
        description = (
            f"{splits} splits, each a seeded random sample of {span} of the records, sizes drawn from the "
            "seed, the same for the S2S and the P2P dataset (the TenKGnad recipe)."
        )
        make = functools.partial(flat_splits, splits=splits, min_fraction=min_fraction, max_fraction=max_fraction)
        name, family = TABLE_FLAT, "tenkgnad"
    return Recipe(
        name=name,
        version=TABLE_RECIPE_VERSION,
        description=description,
        make_splits=make,
        params={"draws_as": family, "splits": splits, "min_fraction": min_fraction, "max_fraction": max_fraction,
                "members": MEMBERS_PER_VIEW},
    )


# -- a corpus without labels ----------------------------------------------------------------------
TABLE_UNLABELLED = "table-unlabelled"
UNLABELLED_SPLIT = "all"
UNLABELLED_LEVEL = "none"  # a split's level where the records carry no label


def unlabelled_splits(items: list[Item], seed: int, view: str | None = None, *, sample: int | None = None) -> list[Split]:
    """One split of every record, or of a seeded sample of ``sample`` records (keyed-hash order, as
    every recipe draws members), with no labels: what a label-free evaluation clusters."""
    order = seeding.keyed_order(sorted(it.id for it in items),
                                _members_key(seed, "unlabelled", UNLABELLED_SPLIT, view))
    if sample is not None:
        order = order[:sample]
    return [Split(UNLABELLED_SPLIT, UNLABELLED_LEVEL, tuple(order), ())]


def unlabelled_recipe(*, sample: int | None = None) -> Recipe:
    """The recipe of a table built without a label column: one split, every text or a seeded sample."""
    import functools

    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 2):
        raise ValueError(f"the sample size must be an integer of 2 or more, got {sample!r}")
    what = "every record" if sample is None else f"a seeded random sample of {sample:,} records"
    return Recipe(
        name=TABLE_UNLABELLED,
        version="1",
        description=(f"A corpus without labels: one split holding {what}. No V-measure or other score that needs "
                     "labels applies to it; tecb scores its clusterings with label-free criteria."),
        make_splits=functools.partial(unlabelled_splits, sample=sample),
        params={"labelled": False, "sample": sample, "members": MEMBERS_PER_VIEW},
    )
