"""The fixed settings the paper's recipe gives its estimators, shared by the registry (which builds
them) and the estimators that are ours (which take them as defaults)."""

# MTEB v1's settings, which the paper used for k-means; MTEB v2 (the fast protocol) uses its own.
KMEANS_BATCH_SIZE = 500
FAST_KMEANS_BATCH_SIZE = 512
# The paper's pca+umap: PCA to 50 components before UMAP (a cheaper neighbour search).
PCA_PRE_COMPONENTS = 50
UMAP_NEIGHBOURS = 15
# A cell estimated to take longer than this on one core is refused before any work (--time-limit).
DEFAULT_TIME_LIMIT = 3600.0
