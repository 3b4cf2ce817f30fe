"""Writes the small embedded demo sample (tecb_data/demo/) in the GermEval 2019 and OMPC formats.

The texts are written for this project from phrase lists per genre and section, so the demo
clusters in a recognisable way without any licensed data. Deterministic: run it again, same bytes.

    python tools/make_demo_data.py
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "tecb_data" / "demo"

# top-level genre -> second-level genre -> (title words, blurb sentences)
GENRES = {
    "Literatur & Unterhaltung": {
        "Krimi & Thriller": (
            ["Mord", "Kommissar", "Tatort", "Spur", "Verhör", "Schuld", "Alibi", "Zeuge"],
            ["Kommissarin Berger ermittelt in einem rätselhaften Mordfall.", "Ein Zeuge schweigt, und die Spur führt nach Hamburg.",
             "Das Alibi des Verdächtigen beginnt zu bröckeln.", "Im Hafen wird eine Leiche gefunden & niemand will etwas gesehen haben."],
        ),
        "Romane & Erzählungen": (
            ["Sommer", "Erinnerung", "Heimat", "Familie", "Liebe", "Abschied", "Haus", "Jahre"],
            ["Eine Familie kehrt nach vielen Jahren in das alte Haus am See zurück.", "Zwischen Erinnerung und Gegenwart sucht sie ihren Weg.",
             "Ein leiser Roman über Liebe, Verlust und Neubeginn.", "Drei Generationen erzählen von einem Sommer, der alles veränderte."],
        ),
        "Fantasy": (
            ["Drachen", "Zauberer", "Reich", "Schwert", "Elfen", "Prophezeiung", "Magie", "Turm"],
            ["Die junge Magierin muss das Reich vor dem Drachenkönig retten.", "Eine alte Prophezeiung erwacht im Turm der Elfen.",
             "Mit Schwert und Zauber zieht die Gefährtenschaft nach Norden.", "Die Magie verlässt das Land, und nur ein Kind kann sie zurückbringen."],
        ),
    },
    "Ratgeber": {
        "Gesundheit & Ernährung": (
            ["Ernährung", "Rezepte", "Gesund", "Darm", "Vitamine", "Fasten", "Küche", "Fitness"],
            ["Mit einfachen Rezepten gesund durch den Alltag.", "Der Ratgeber erklärt, wie Ernährung und Wohlbefinden zusammenhängen.",
             "Fasten, Bewegung und Schlaf: ein Programm für vier Wochen.", "Vitamine, Mineralstoffe & Eiweiß verständlich erklärt."],
        ),
        "Beruf & Finanzen": (
            ["Karriere", "Geld", "Bewerbung", "Erfolg", "Vermögen", "Führung", "Verhandeln", "Steuern"],
            ["So gelingt die Bewerbung und das erste Gespräch mit dem Chef.", "Ein Leitfaden für Vermögen, Vorsorge und Steuern.",
             "Führungskräfte lernen, klar zu verhandeln.", "Erfolg im Beruf beginnt mit den richtigen Fragen."],
        ),
    },
    "Kinderbuch & Jugendbuch": {
        "Bilderbuch": (
            ["Bär", "Hase", "Gute Nacht", "Wald", "Freunde", "Bauernhof", "Mond", "Kuscheltier"],
            ["Der kleine Bär kann nicht einschlafen und sucht den Mond.", "Ein Bilderbuch über Freundschaft im Wald.",
             "Hase und Igel entdecken den Bauernhof.", "Zum Vorlesen für Kinder ab drei Jahren."],
        ),
        "Abenteuer": (
            ["Schatz", "Insel", "Piraten", "Geheimnis", "Bande", "Expedition", "Höhle", "Detektive"],
            ["Die Bande entdeckt eine Karte zu einem verborgenen Schatz.", "Auf der Insel wartet ein Geheimnis auf die Kinder.",
             "Eine Expedition in die Höhle beginnt.", "Die jungen Detektive lösen ihren schwierigsten Fall."],
        ),
    },
    "Sachbuch": {
        "Geschichte": (
            ["Kaiser", "Krieg", "Revolution", "Mittelalter", "Reich", "Weimar", "Preußen", "Jahrhundert"],
            ["Eine Geschichte des Mittelalters aus der Sicht der Bauern.", "Der Historiker erzählt von Revolution und Restauration.",
             "Preußen zwischen Aufstieg und Untergang.", "Das Jahrhundert der Weltkriege in zwölf Kapiteln."],
        ),
        "Naturwissenschaft": (
            ["Universum", "Gene", "Klima", "Evolution", "Physik", "Gehirn", "Atome", "Planeten"],
            ["Wie das Universum entstand, verständlich erklärt.", "Gene, Evolution und die Frage nach dem Ursprung des Lebens.",
             "Das Klima verändert sich schneller als gedacht.", "Ein Physiker erklärt Atome, Licht und Zeit."],
        ),
    },
    "Glaube & Ethik": {
        "Christentum": (
            ["Bibel", "Gebet", "Kirche", "Glaube", "Psalmen", "Pilger", "Advent", "Gemeinde"],
            ["Gebete und Psalmen für jeden Tag des Jahres.", "Ein Pfarrer erzählt vom Leben in seiner Gemeinde.",
             "Die Bibel neu gelesen für Suchende.", "Gedanken zum Advent und zur Weihnachtszeit."],
        ),
        "Philosophie": (
            ["Ethik", "Freiheit", "Wahrheit", "Vernunft", "Glück", "Sinn", "Denken", "Moral"],
            ["Was ist Freiheit, und wie viel davon brauchen wir?", "Eine Einführung in Ethik und Moral.",
             "Große Denker über Glück und den Sinn des Lebens.", "Vernunft und Wahrheit im Zeitalter der Medien."],
        ),
    },
    "Künste": {
        "Musik": (
            ["Symphonie", "Oper", "Jazz", "Komponist", "Klavier", "Beethoven", "Konzert", "Lied"],
            ["Das Leben eines Komponisten zwischen Oper und Symphonie.", "Eine Geschichte des Jazz in Deutschland.",
             "Beethoven und die Revolution der Musik.", "Vom Klavier zum Konzertsaal."],
        ),
        "Malerei": (
            ["Maler", "Farbe", "Atelier", "Bild", "Expressionismus", "Museum", "Leinwand", "Porträt"],
            ["Ein Maler und sein Atelier in Paris.", "Die Farben des Expressionismus.",
             "Ein Porträt, das Museumsgeschichte schrieb.", "Leinwand und Licht in der Kunst der Moderne."],
        ),
    },
    "Architektur & Garten": {
        "Garten": (
            ["Garten", "Rosen", "Beet", "Gemüse", "Kräuter", "Balkon", "Obstbaum", "Kompost"],
            ["Der Gartenratgeber für Beet, Balkon und Kräuter.", "Rosen pflanzen, pflegen und schneiden.",
             "Gemüse aus dem eigenen Garten das ganze Jahr.", "Kompost, Boden und Obstbaum richtig pflegen."],
        ),
        "Architektur": (
            ["Bauhaus", "Haus", "Stadt", "Beton", "Baukunst", "Fassade", "Wohnen", "Brücke"],
            ["Das Bauhaus und die moderne Stadt.", "Wohnen in Beton und Glas.",
             "Baukunst von der Brücke bis zur Fassade.", "Ein Architekt erklärt, wie Häuser entstehen."],
        ),
    },
    "Ganzheitliches Bewusstsein": {
        "Meditation": (
            ["Achtsamkeit", "Stille", "Atem", "Meditation", "Gelassenheit", "Yoga", "Mitte", "Ruhe"],
            ["Achtsamkeit und Meditation für mehr Gelassenheit.", "Mit dem Atem zur inneren Ruhe.",
             "Yoga und Stille im hektischen Alltag.", "Übungen, die zur eigenen Mitte führen."],
        ),
        "Esoterik": (
            ["Engel", "Energie", "Seele", "Chakren", "Karma", "Tarot", "Kristalle", "Aura"],
            ["Die Sprache der Engel verstehen.", "Chakren, Aura und die Energie der Seele.",
             "Karma und die Wege des Schicksals.", "Tarot als Spiegel der Seele."],
        ),
    },
}
PATTERNS = ["{a} und {b}", "Das {a}-Buch", "{a}: {b}", "Die Kunst der {a}", "{a} im {b}", "Kleine {a}-Schule"]
DEV_HEADER = "<root>\n"


def _book(rng: random.Random, isbn: int, paths: list[tuple[str, ...]], words, sentences, with_labels=True) -> str:
    a, b = rng.sample(words, 2)
    title = rng.choice(PATTERNS).format(a=a, b=b)
    blurb = " ".join(rng.sample(sentences, 3))
    lines = ['<book date="2019-01-04" xml:lang="de">', f"<title>{title}</title>", f"<body>{blurb}</body>",
             "<copyright>(c) tecb demo</copyright>"]
    if with_labels:
        lines.append("<categories>")
        for path in paths:
            lines.append("<category>")
            for depth, name in enumerate(path):
                label = ' label="True"' if depth == len(path) - 1 else ""
                lines.append(f'<topic d="{depth}"{label}>{name}</topic>')
            lines.append("</category>")
        lines.append("</categories>")
    lines += ["<authors>tecb</authors>", "<published>2019-01-01</published>", f"<isbn>{isbn}</isbn>", "</book>", ""]
    return "\n".join(lines)


def blurbs(rng: random.Random) -> dict[str, str]:
    books, isbn = [], 9783000000000
    flat = [(top, sub, data) for top, subs in GENRES.items() for sub, data in subs.items()]
    for top, sub, (words, sentences) in flat:
        for _ in range(12):
            isbn += 7
            paths = [(top, sub)]
            if rng.random() < 0.2:  # a second, more frequent or rarer second-level genre of the same top
                other = rng.choice([s for s in GENRES[top] if s != sub])
                paths.append((top, other))
            books.append(_book(rng, isbn, paths, words, sentences))
    # records the selection rule rejects: two top-level genres, and three second-level genres
    isbn += 7
    books.append(_book(rng, isbn, [("Sachbuch", "Geschichte"), ("Künste", "Musik")], *GENRES["Sachbuch"]["Geschichte"]))
    isbn += 7
    three = [("Literatur & Unterhaltung", s) for s in GENRES["Literatur & Unterhaltung"]]
    books.append(_book(rng, isbn, three, *GENRES["Literatur & Unterhaltung"]["Fantasy"]))
    rng.shuffle(books)
    cut = len(books) * 3 // 4
    unlabelled = []
    for _ in range(5):
        isbn += 7
        top, sub, (words, sentences) = rng.choice(flat)
        unlabelled.append(_book(rng, isbn, [], words, sentences, with_labels=False))
    return {
        # train without the <root> wrapper, dev with it: both occur in the real release
        "blurbs_train.txt": "\n".join(books[:cut]),
        "blurbs_dev.txt": DEV_HEADER + "\n".join(books[cut:]) + "</root>\n",
        "blurbs_test.txt": DEV_HEADER + "\n".join(unlabelled) + "</root>\n",
    }


SECTIONS = {
    "Sport": ["Fußball", "Tor", "Trainer", "Meisterschaft", "Skirennen", "Rapid Wien", "Nationalteam", "Finale"],
    "Wirtschaft": ["Inflation", "Börse", "Unternehmen", "Arbeitsmarkt", "Zinsen", "Exporte", "Bank", "Konjunktur"],
    "Inland": ["Nationalrat", "Regierung", "Landtag", "Koalition", "Kanzler", "Wahl", "Ministerium", "Partei"],
    "International": ["EU-Gipfel", "Präsident", "Wahlkampf", "Flüchtlinge", "UN-Sicherheitsrat", "Botschaft", "Grenze", "Abkommen"],
    "Web": ["Smartphone", "App", "Google", "Datenschutz", "Hacker", "Update", "Netflix", "Internet"],
    "Wissenschaft": ["Forscher", "Studie", "Weltraum", "Klimawandel", "Genetik", "Teleskop", "Fossil", "Labor"],
    "Kultur": ["Festival", "Ausstellung", "Roman", "Theater", "Album", "Regisseur", "Oper", "Museum"],
    "Panorama": ["Unfall", "Polizei", "Feuerwehr", "Gericht", "Unwetter", "Prozess", "Brand", "Zeugen"],
    "Etat": ["ORF", "Medien", "Zeitung", "Fernsehen", "Quoten", "Werbung", "Radio", "Journalisten"],
}
VERBS = ["sorgt für Aufsehen", "steht vor dem Aus", "bringt Neuerungen", "wird heftig diskutiert", "zieht Bilanz", "überrascht alle"]


def ompc(rng: random.Random, path: Path) -> None:
    rows, article_id = [], 1000
    for section, words in SECTIONS.items():
        for _ in range(10):
            article_id += rng.randint(1, 9)
            a, b, c = rng.sample(words, 3)
            title = f"{a}: {b} {rng.choice(VERBS)}"
            sub = f"{b} und {c} beschäftigen die Öffentlichkeit."
            paragraphs = [f"Wien – {a} {rng.choice(VERBS)}, berichten Beobachter zum Thema {c}.",
                          f"Fachleute erwarten, dass {b} auch in den kommenden Wochen {rng.choice(VERBS)}.",
                          f"({rng.choice(['APA', 'red', 'Maria Huber'])}, {rng.randint(1, 28)}.{rng.randint(1, 12)}.2016)"]
            body = (f'<h2 itemprop="description">{sub}</h2><div class="copytext">'
                    + "".join(f"<p>{p}</p>" for p in paragraphs) + "</div>")
            rows.append((article_id, f"Newsroom/{section}/{b.replace(' ', '')}", f"2016-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 10:00:00.00", title, body))
    # paths the recipe leaves out: user contributions and a section outside 10kGNAD's nine
    rows.append((article_id + 1, "Newsroom/User/Blog", "2016-01-01 10:00:00.00", "Mein Blog", "<p>Leserbeitrag</p>"))
    rows.append((article_id + 2, "Newsroom/Lifestyle/Mode", "2016-01-01 10:00:00.00", "Mode im Herbst", "<p>Mode</p>"))
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE Articles (ID_Article INTEGER PRIMARY KEY, Path TEXT, publishingDate TIMESTAMP, Title TEXT, Body TEXT)")
    connection.executemany("INSERT INTO Articles VALUES (?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.execute("VACUUM")
    connection.close()


def main() -> None:
    (DEMO / "blurbs").mkdir(parents=True, exist_ok=True)
    (DEMO / "ompc").mkdir(parents=True, exist_ok=True)
    for name, text in blurbs(random.Random(2019)).items():
        (DEMO / "blurbs" / name).write_text(text, encoding="utf-8")
    ompc(random.Random(2017), DEMO / "ompc" / "corpus.sqlite3")


if __name__ == "__main__":
    main()
