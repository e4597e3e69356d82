"""The one typed settings object: CLI flags > environment `MLOG_*` > defaults, loaded once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from api.service.retention import RetentionConfig
from metadata_log.config import LogConfig
from records.errors import MetadataLogError

OUTPUT_FORMATS = ("table", "json")
SNAPSHOT_DB_NAME = "snapshots.db"
SNAPSHOT_MAX_CHAIN = 8
"""Increments the service writes in a row before a full snapshot, and the most it may be set to
(MLOG_SNAPSHOT_MAX_CHAIN): a load holds its chain's rows beside the image it builds, at most 5%
of the image's partitions each (replay/sql/increments.py), so at most 40% of a full one's."""


class SettingsError(MetadataLogError):
    """A setting (flag or environment variable) has an invalid value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything the `mlog` command needs to know about where and how to work."""

    data_dir: Path
    output: str = "table"
    log: LogConfig = field(default_factory=LogConfig)
    debug: bool = False
    database_url: str | None = None
    """The snapshot database (`--db`, MLOG_DATABASE_URL); None = the data directory's file."""
    snapshot_retention: int = 10
    """Snapshots kept after each new one (MLOG_SNAPSHOT_RETENTION); at least 1."""
    snapshot_retention_bytes: int | None = None
    """The most bytes the kept snapshots may hold, the newest always kept
    (MLOG_SNAPSHOT_RETENTION_BYTES; None: no bound, -1 in the variable)."""
    snapshot_max_chain: int = SNAPSHOT_MAX_CHAIN
    """Increments written in a row before a full snapshot (MLOG_SNAPSHOT_MAX_CHAIN; 0: every
    snapshot full)."""
    bootstrap_server: str | None = None
    """A server to run commands against (`--bootstrap-server`, MLOG_BOOTSTRAP_SERVER)."""
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    """Online retention and the snapshot cadence (`mlog serve`'s server.properties keys)."""

    @property
    def log_dir(self) -> Path:
        """The log directory inside the data directory."""
        return self.data_dir / "log"

    @property
    def snapshot_database_url(self) -> str:
        """The snapshot database URL: the one given, or SQLite `<data-dir>/snapshots.db`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / SNAPSHOT_DB_NAME).absolute()}"

    @property
    def snapshot_file(self) -> Path | None:
        """The default snapshot database's file; None when `--db` names another database."""
        if self.database_url:
            return None
        return (self.data_dir / SNAPSHOT_DB_NAME).absolute()


_LOG_KEYS = {
    "segment_bytes": ("MLOG_SEGMENT_BYTES", "segment.bytes"),
    "segment_ms": ("MLOG_SEGMENT_MS", "segment.ms"),
    "index_interval_bytes": ("MLOG_INDEX_INTERVAL_BYTES", "index.interval.bytes"),
}


def _int_setting(env: Mapping[str, str], var: str, key: str) -> int | None:
    raw = env.get(var)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{var} ({key}) must be an integer, got {raw!r}") from None


def load_settings(
    *,
    data_dir: str | None = None,
    output: str | None = None,
    debug: bool = False,
    database_url: str | None = None,
    bootstrap_server: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build the settings from flags (None = not given), then the environment, then defaults."""
    env = os.environ if env is None else env
    chosen_dir = data_dir or env.get("MLOG_DATA_DIR") or "./mlog-data"
    chosen_output = output or env.get("MLOG_OUTPUT") or "table"
    if chosen_output not in OUTPUT_FORMATS:
        raise SettingsError(
            f"output format {chosen_output!r} is not one of {', '.join(OUTPUT_FORMATS)}"
        )
    log_values = {}
    for field_name, (var, key) in _LOG_KEYS.items():
        value = _int_setting(env, var, key)
        if value is not None:
            log_values[field_name] = value
    retention = _int_setting(env, "MLOG_SNAPSHOT_RETENTION", "snapshot retention")
    if retention is not None and retention < 1:
        raise SettingsError(
            f"MLOG_SNAPSHOT_RETENTION must keep at least 1 snapshot, got {retention}"
        )
    retention_bytes = _int_setting(env, "MLOG_SNAPSHOT_RETENTION_BYTES", "snapshot retention bytes")
    if retention_bytes is not None and retention_bytes < -1:
        raise SettingsError(
            "MLOG_SNAPSHOT_RETENTION_BYTES must be -1 (no bound) or 0 or more bytes, got "
            f"{retention_bytes}"
        )
    max_chain = _int_setting(env, "MLOG_SNAPSHOT_MAX_CHAIN", "snapshot chain length")
    if max_chain is not None and not 0 <= max_chain <= SNAPSHOT_MAX_CHAIN:
        raise SettingsError(
            f"MLOG_SNAPSHOT_MAX_CHAIN must be 0 (every snapshot full) to {SNAPSHOT_MAX_CHAIN} "
            f"increments in a row, got {max_chain}"
        )
    return Settings(
        data_dir=Path(chosen_dir),
        output=chosen_output,
        log=LogConfig(**log_values),
        debug=debug or env.get("MLOG_DEBUG", "") not in ("", "0", "false"),
        database_url=database_url or env.get("MLOG_DATABASE_URL") or None,
        snapshot_retention=10 if retention is None else retention,
        snapshot_retention_bytes=(
            None if retention_bytes is None or retention_bytes < 0 else retention_bytes
        ),
        snapshot_max_chain=SNAPSHOT_MAX_CHAIN if max_chain is None else max_chain,
        bootstrap_server=bootstrap_server or env.get("MLOG_BOOTSTRAP_SERVER") or None,
    )
