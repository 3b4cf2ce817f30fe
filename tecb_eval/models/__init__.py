"""Text -> vectors: the registry of model kinds (:mod:`~tecb_eval.models.registry`), one module per
kind with its encoder (:mod:`~tecb_eval.models.kinds`: sentence-transformers, plain transformers
with mean pooling, the offline built-ins, ``mteb:`` models, any object with ``encode``), the face
that loads and checks them (:mod:`~tecb_eval.models.encoders`), model resolution and devices.
At the bottom of ``tecb_eval``: imports only :mod:`tecb_data` and :mod:`tecb_eval.files`.
"""
