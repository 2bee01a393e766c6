"""The text room: every line, table and Markdown page the loop prints (no I/O, no decision)."""
