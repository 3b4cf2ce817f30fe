"""Reading the results store: which version a table shows (``versions``), the paper's tables and
ours (``tables``), paired comparisons (``compare``), plots (``figures``), the export folder
(``export``), the HTML report (``leaderboard``: what its pages show; ``html``: the site, from the
Jinja2 templates in ``templates/``) and the best pipeline per dataset (``recommend``).
Imports the grid's store and caches and everything below; never the CLI.
"""
