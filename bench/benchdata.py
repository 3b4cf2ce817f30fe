"""Where the benches find the shared data and the published datasets' sizes (no heavy imports: a
bench's child processes import it before measuring their baseline memory)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
BLURBS_DEV = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"
STATS = SHARED / "reference" / "mteb-descriptive-stats"
# The published datasets: (stats file, splits) -- the recipes' split counts.
PUBLISHED = {
    "Blurbs S2S": ("BlurbsClusteringS2S.json", 28), "Blurbs P2P": ("BlurbsClusteringP2P.json", 28),
    "10kGNAD S2S": ("TenKGnadClusteringS2S.json", 10), "10kGNAD P2P": ("TenKGnadClusteringP2P.json", 10),
    "Reddit S2S": ("RedditClustering.json", 10), "Reddit P2P": ("RedditClusteringP2P.json", 10),
}
