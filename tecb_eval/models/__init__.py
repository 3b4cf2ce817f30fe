"""Text -> vectors: the encoder protocol and its adapters (sentence-transformers, plain transformers
with mean pooling, the offline built-ins, any object with ``encode``), model resolution and devices.
At the bottom of ``tecb_eval``: imports only :mod:`tecb_data` and :mod:`tecb_eval.files`.
"""
