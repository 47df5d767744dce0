"""Reference in-memory models: the executable specification of each contract."""
