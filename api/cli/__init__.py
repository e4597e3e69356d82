"""The `mlog` command line: one module per noun, plus the parts they share.

Nouns (each module holds the verbs, flags and handlers of `mlog <noun> ...`): `brokers`,
`topics`, `configs`, `leaders`, `partitions`, `image` (show, diff), `log`, `namespaces`, `db`,
`snapshot`, `history`, `shell`, `serve`, `audit`. Shared: `main` (the parser of nouns and the
dispatch), `common` (exit codes, `CliError`, argument types, global options), `output` (tables,
answers, times), `targets` (the data directory or a server), `topic_options` (--topic,
--topic-id, --namespace), `progress`, `image_tree`.

Start-up is part of the interface: a command imports what it uses and nothing else. `main`
imports a noun's module only when that noun is chosen, and a noun module imports at top level
only what its parser and its output need; kio (the server, the client), SQLAlchemy and Alembic
(the snapshot store), PySpark (audit) and the controller's request types are imported inside
the handlers that use them. `tests/api/cli/test_cli_startup.py` checks this; `bench/cli_bench.py`
times it.
"""

from api.cli.main import main

__all__ = ["main"]
