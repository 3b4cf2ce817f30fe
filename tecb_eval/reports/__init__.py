"""Reading the results store: which version a table shows (``versions``), the paper's tables and
ours (``tables``), paired comparisons (``compare``), plots (``figures``) and the export folder
(``export``). Imports the grid's store and caches and everything below; never the CLI.
"""
