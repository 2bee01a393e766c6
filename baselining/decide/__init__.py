"""The decision room: the verdict as one pure function of the gathered evidence, its caps and a
baseline's stored side (no I/O: the import contracts in pyproject.toml hold it)."""
