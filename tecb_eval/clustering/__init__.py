"""Vectors -> labels -> scores: the dimensionality reductions and clustering algorithms with
scikit-learn's face (DBSTREAM adapters included), the reproduction profiles and the legacy k-means
evaluation of one split. At the bottom of ``tecb_eval``: imports no other room.
"""
