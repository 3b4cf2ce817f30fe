"""Reddit source without praw: texts, deletion rules, id lists, the cache, the splits, language selection."""

from __future__ import annotations

import random
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tecb_data import cli
from tecb_data.errors import UserError
from tecb_data.recipes import REDDIT_SPLITS, Item, reddit_splits, reddit_subreddit_range
from tecb_data.sources import reddit_collect, reddit_ids
from tecb_data.sources.reddit_cache import KEPT, RehydrationCache
from tecb_data.sources.reddit_text import (
    AUTHOR_GONE,
    DELETED,
    EMPTY_TITLE,
    NOT_RETURNED,
    REMOVED,
    Fetched,
    clean,
    drop_reason,
    views,
)
from helpers import SHARED

SHARED = SHARED
REAL_IDS = SHARED / "data" / "reddit" / "submission_ids.txt"


def post(item_id="abc", title="Ein Titel", body="Ein Text", category=None, author_gone=False, subreddit="de"):
    return Fetched(item_id, subreddit, title, body, category, author_gone)


# --- texts -------------------------------------------------------------------------------------


def test_markdown_links_keep_their_text_and_urls_go():
    text = "Siehe [den Artikel](https://x.de/a_(b)) und ![Bild](http://y.de/p.png \"Titel\"), sonst https://z.de/q?a=1."
    assert clean(text) == "Siehe den Artikel und Bild, sonst ."
    assert clean("mehr auf www.example.org/seite und <https://a.b/c>!") == "mehr auf und !"
    assert clean("  viel\n\n  Leerraum\t") == "viel Leerraum"


def test_views_are_title_and_title_plus_body():
    assert views("Titel [hier](https://a.de)", "Text mit https://b.de Link") == {
        "s2s": "Titel hier",
        "p2p": "Titel hier Text mit Link",
    }
    assert views("Nur ein Link-Post", "") == {"s2s": "Nur ein Link-Post", "p2p": "Nur ein Link-Post"}


@pytest.mark.parametrize(
    "submission, reason",
    [
        (None, NOT_RETURNED),
        (post(category="deleted"), DELETED),
        (post(body="[deleted]"), DELETED),
        (post(title="[deleted by user]", body=""), DELETED),
        (post(category="moderator"), REMOVED),
        (post(category="automod_filtered"), REMOVED),
        (post(body=" [removed] "), REMOVED),
        (post(title="[removed]"), REMOVED),
        (post(author_gone=True), AUTHOR_GONE),
        (post(title="https://nur-ein-link.de"), EMPTY_TITLE),
        (post(body="Ich zitiere: [removed] stand da"), None),
        (post(), None),
    ],
)
def test_drop_reasons(submission, reason):
    assert drop_reason(submission) == reason


# --- id lists ----------------------------------------------------------------------------------


def test_id_list_formats(tmp_path):
    flat = tmp_path / "ids.txt"
    flat.write_text("id\nzz1\nt3_a1\nzz1\nb2\n")
    ids = reddit_ids.read(flat)
    assert ids.ids == ("a1", "b2", "zz1")  # numeric base-36 order, de-duplicated
    assert ids.universe is None and ids.report == {"duplicate_ids": 1}
    assert ids.input.name == "ids.txt" and len(ids.input.sha256) == 64

    two = tmp_path / "two.txt"
    two.write_text("id,subreddit\nb2,de\na1,r/Finanzen\n")
    ids = reddit_ids.read(two)
    assert ids.subreddits == {"b2": "de", "a1": "Finanzen"} and ids.universe == ("Finanzen", "de")

    written = tmp_path / "out" / "written.txt"
    reddit_ids.write(written, [("zz1", "de"), ("a1", "Finanzen")])
    assert written.read_text() == "id,subreddit\na1,Finanzen\nzz1,de\n"
    assert [p.name for p in written.parent.iterdir()] == ["written.txt"]  # no temporary left


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty id list"),
        ("ids\nabc\n", "ids.txt:1: expected the header `id`"),
        ("id\nabc\nNOT-AN-ID\n", "ids.txt:3: 'NOT-AN-ID' is not a base-36"),
        ("id,subreddit\nabc\n", "ids.txt:2: expected 2 comma-separated"),
        ("id,subreddit\nabc,de\nabc,at\n", "ids.txt:3: id abc listed before with subreddit de"),
        ("id,subreddit\nabc,x y\n", "ids.txt:2: 'x y' is not a subreddit name"),
        ("id\n\n", "header but no ids"),
    ],
)
def test_id_list_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "ids.txt"
    path.write_text(text)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("`", "`")):
        reddit_ids.read(path)


def test_missing_id_list(tmp_path):
    with pytest.raises(UserError, match="no such file or folder"):
        reddit_ids.read(tmp_path / "nope.txt")


def test_real_id_list_parses():
    if not REAL_IDS.is_file():
        pytest.skip(f"shared data not found at {REAL_IDS}")
    ids = reddit_ids.read(REAL_IDS)
    lines = REAL_IDS.read_text().split()[1:]
    assert len(lines) == 47_794
    assert len(ids.ids) == len(set(lines)) and ids.report["duplicate_ids"] == len(lines) - len(set(lines))


class _Files(BaseHTTPRequestHandler):
    body = b"id\nabc\ndef\n"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/lists/ids.txt":
            self.send_response(200)
            self.send_header("content-length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)
        else:
            self.send_error(404)


def test_id_list_by_url_and_download_errors():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ids = reddit_ids.read(f"{base}/lists/ids.txt")
        assert ids.ids == ("abc", "def") and ids.input.name == "ids.txt"
        with pytest.raises(UserError) as error:
            reddit_ids.read(f"{base}/missing.txt?token=hunter2")
        assert f"{base}/missing.txt: HTTP 404" in str(error.value) and "hunter2" not in str(error.value)
        with pytest.raises(UserError) as error:
            reddit_ids.read(f"http://user:hunter2@127.0.0.1:{server.server_address[1]}/ids.txt")
        assert "cannot download" in str(error.value) and "hunter2" not in str(error.value)
    finally:
        server.shutdown()
        server.server_close()


# --- the cache ---------------------------------------------------------------------------------


def _fetched(ids, gone=()):
    return [post(i, title=f"Titel {i}", body=f"Geheimer Text {i}") for i in ids if i not in gone]


def test_cache_resumes_with_what_it_has(tmp_path):
    ids = [f"a{i:03d}" for i in range(250)]
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)
        assert cache.due(ids) == ids
        cache.store_batch(ids[:100], _fetched(ids[:100], gone={"a005"}))
    with RehydrationCache(tmp_path) as cache:  # a new run after the first one was killed
        cache.start(refresh=False)
        assert cache.due(ids) == ids[100:]
        entries = cache.entries(ids[:100])
        assert entries["a005"].status == NOT_RETURNED and entries["a005"].title is None
        assert entries["a006"].status == KEPT and entries["a006"].body == "Geheimer Text a006"


def test_refresh_rechecks_everything_and_resumes_when_killed(tmp_path):
    ids = [f"a{i:03d}" for i in range(200)]
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)
        cache.store_batch(ids[:100], _fetched(ids[:100]))
        cache.store_batch(ids[100:], _fetched(ids[100:]))
        cache.finish()
        assert cache.due(ids) == []
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=True)
        assert cache.due(ids) == ids
        cache.store_batch(ids[:100], _fetched(ids[:100], gone={"a042"}))
        # killed here: no finish()
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)  # a plain run continues the refresh under way
        assert cache.due(ids) == ids[100:]
        cache.store_batch(ids[100:], _fetched(ids[100:]))
        cache.finish()
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)
        assert cache.due(ids) == []
        assert cache.entries(["a042"])["a042"].status == NOT_RETURNED


def test_dropped_texts_are_purged_from_the_file(tmp_path):
    ids = [f"b{i:03d}" for i in range(100)]
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)
        cache.store_batch(ids, _fetched(ids))
    assert b"Geheimer Text b007" in b"".join(p.read_bytes() for p in tmp_path.iterdir())
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=True)
        cache.store_batch(ids, _fetched(ids, gone={"b007"}))
        cache.finish()
    files = list(tmp_path.iterdir())
    assert b"Geheimer Text b007" not in b"".join(p.read_bytes() for p in files)
    assert b"Geheimer Text b008" in b"".join(p.read_bytes() for p in files)


def test_damaged_cache_is_a_user_error(tmp_path):
    (tmp_path / "reddit-rehydration.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserError, match="damaged rehydration cache.*delete the file"):
        RehydrationCache(tmp_path)


def test_cache_holds_no_author_names(tmp_path):
    with RehydrationCache(tmp_path) as cache:
        cache.start(refresh=False)
        cache.store_batch(["c1"], [post("c1")])
    columns = [row[1] for row in sqlite3.connect(tmp_path / "reddit-rehydration.sqlite3").execute("PRAGMA table_info(submissions)")]
    assert columns == ["id", "status", "subreddit", "title", "body", "generation"]


# --- splits ------------------------------------------------------------------------------------


def _items(n=6000, subreddits=80, seed=0):
    rng = random.Random(seed)
    names = [f"sub{k:02d}" for k in range(subreddits)]
    return [
        Item(id=f"{i:x}", views={"s2s": f"t{i}"}, labels={"subreddit": rng.choice(names)}, path=())
        for i in range(10_000, 10_000 + n)
    ], names


def _rows(splits):
    return {s.name: list(zip(s.ids, s.labels)) for s in splits}


def test_splits_hold_whole_subreddits_of_10_to_50():
    items, names = _items()
    splits = reddit_splits(items, 42, names)
    assert [s.name for s in splits] == [f"subreddits-{i:02d}" for i in range(REDDIT_SPLITS)]
    by_sub = {}
    for it in items:
        by_sub.setdefault(it.labels["subreddit"], set()).add(it.id)
    for split in splits:
        chosen = set(split.labels)
        assert 10 <= len(chosen) <= 50
        assert set(split.ids) == set().union(*(by_sub[s] for s in chosen))  # every submission of them
    assert len({tuple(sorted(set(s.labels))) for s in splits}) == REDDIT_SPLITS
    assert reddit_splits(items, 43, names) != splits


def test_splits_do_not_depend_on_input_order():
    items, names = _items(2000)
    shuffled = items[:]
    random.Random(5).shuffle(shuffled)
    assert reddit_splits(shuffled, 42, list(reversed(names))) == reddit_splits(items, 42, names)


def test_deleting_k_submissions_changes_exactly_their_rows():
    items, names = _items()
    before = _rows(reddit_splits(items, 42, names))
    rng = random.Random(1)
    deleted = set(rng.sample([it.id for it in items], 37))
    # also every submission of one subreddit: the draws come from the id list's subreddits
    deleted |= {it.id for it in items if it.labels["subreddit"] == "sub07"}
    after = _rows(reddit_splits([it for it in items if it.id not in deleted], 42, names))
    for name, rows in before.items():
        assert after[name] == [row for row in rows if row[0] not in deleted]
    assert sum(len(r) for r in before.values()) - sum(len(r) for r in after.values()) == sum(
        1 for rows in before.values() for row in rows if row[0] in deleted
    )


def test_few_subreddits_are_clamped():
    assert reddit_subreddit_range(80) == (10, 50)
    assert reddit_subreddit_range(30) == (10, 30)
    assert reddit_subreddit_range(10) == (5, 10)
    assert reddit_subreddit_range(3) == (2, 3)
    items, names = _items(300, subreddits=4)
    for split in reddit_splits(items, 42, names):
        assert 2 <= len(set(split.labels)) <= 4


# --- language selection ------------------------------------------------------------------------

GERMAN = [
    "Wie findet ihr die Preise im Supermarkt in letzter Zeit, alles wird teurer",
    "Meine Großmutter hat mir ein altes Rezept für Apfelkuchen gegeben",
    "Gibt es hier jemanden, der sich mit Steuererklärungen gut auskennt",
    "Die Bahn hatte heute wieder über eine Stunde Verspätung, unglaublich",
]
ENGLISH = [
    "I have been wondering what everyone here thinks about the new train line",
    "Can someone recommend a good book about the history of this city",
]


def test_language_selection_filters_only_mixed_subreddits():
    german = [post(f"g{i}", title=t, body="") for i, t in enumerate(GERMAN * 5)]
    english = [post(f"e{i}", title=t, body="") for i, t in enumerate(ENGLISH * 3)]
    kept, in_language, mixed = reddit_collect.select_language(german + english[:1], "de")
    assert not mixed and in_language == 20 and len(kept) == 21  # 95 % German: kept whole
    kept, in_language, mixed = reddit_collect.select_language(german + english, "de")
    assert mixed and {p.id for p in kept} == {p.id for p in german}
    # the language is a parameter: the same tool selects English posts
    kept, _, mixed = reddit_collect.select_language(german + english, "en")
    assert mixed and {p.id for p in kept} == {p.id for p in english}
    # seeded: the same answer every time
    assert [reddit_collect.language_probability(t, "de") for t in GERMAN] == [
        reddit_collect.language_probability(t, "de") for t in GERMAN
    ]


def test_unknown_language_is_refused():
    reddit_collect.check_language("de")
    with pytest.raises(UserError, match="--language 'xx': langdetect knows no such language"):
        reddit_collect.check_language("xx")


def test_subreddit_file_errors(tmp_path):
    path = tmp_path / "subs.txt"
    path.write_text("# German subreddits\nde\nr/Finanzen  # money\n\n")
    assert reddit_collect.read_subreddits(path) == ["de", "Finanzen"]
    path.write_text("de\nDE\n")
    with pytest.raises(UserError, match=r"subs.txt:2: r/DE is listed twice \(first at line 1\)"):
        reddit_collect.read_subreddits(path)
    path.write_text("de\nnot a name\n")
    with pytest.raises(UserError, match="subs.txt:2: 'not a name' is not a subreddit name"):
        reddit_collect.read_subreddits(path)


# --- command line ------------------------------------------------------------------------------


def test_cli_keeps_reddit_options_to_reddit(tmp_path, capsys):
    assert cli.main(["build", "--source", "blurbs", "--demo", "--out", str(tmp_path), "--ids", "x.txt"]) == 2
    assert "--ids is for --source reddit only" in capsys.readouterr().err
    assert cli.main(["build", "--source", "reddit", "--input", "x", "--out", str(tmp_path)]) == 2
    assert "--source reddit takes --ids" in capsys.readouterr().err
