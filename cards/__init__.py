# Dataset card templates (Jinja2), one per source; shipped in the wheel as tecb_data.cards.
