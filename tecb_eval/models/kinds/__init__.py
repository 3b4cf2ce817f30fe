"""One module per kind of model: its encoder and how a spec of that kind loads, is checked, found
and named. :mod:`tecb_eval.models.registry` lists the kinds; ``common`` holds what they share.
"""
