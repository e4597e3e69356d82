"""Alembic migrations of the snapshot tables; the store finds them with `importlib.resources`."""
