"""One linear history of revisions for every database (SQLite and PostgreSQL alike)."""
