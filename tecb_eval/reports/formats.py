"""The text formats a table is printed or written in: ``format_table`` and every command's
``--format`` read this one list. It imports nothing, so the command line offers the formats
without importing pandas."""

TABLE_FORMATS = ("md", "csv", "latex")
DEFAULT_TABLE_FORMAT = "md"
