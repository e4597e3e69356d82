"""The Alembic environment: migrate the connection the store hands over (or a URL's engine).

`replay.sql.schema` builds the Alembic config in code (no alembic.ini) and passes its own
connection in `config.attributes["connection"]`, so a migration and the check around it share
one connection and transaction. SQLite cannot alter most constraints in place, so migrations run
in batch mode there (`render_as_batch`).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from replay.sql.models import METADATA

target_metadata = METADATA


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Print the SQL for a URL instead of running it (`alembic upgrade --sql`)."""
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate the shared connection, or one opened from the URL."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("no connection and no sqlalchemy.url in the Alembic config")
    engine = create_engine(url)
    try:
        with engine.begin() as own:
            _run(own)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
