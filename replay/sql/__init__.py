"""SQL snapshots of the image: tables, the snapshot store, schema checks (SQLAlchemy 2, Alembic)."""
