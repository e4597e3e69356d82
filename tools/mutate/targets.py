"""Each module under mutation and the tests that judge its mutants (tight: they run per mutant)."""

from __future__ import annotations

_REPLAY_TESTS = (
    "tests/replay/test_replay_rules.py",
    "tests/replay/test_replay.py",
    "tests/replay/test_log_replay_checks.py",
    "tests/replay/test_replay_security.py",
)
_RECORDS_TESTS = (
    "tests/records/test_records.py",
    "tests/records/test_record_declarations.py",
    "tests/records/test_record_schemas_golden.py",
    "tests/records/test_codec_edges.py",
    "tests/records/test_json_form_edges.py",
    "tests/records/test_records_support.py",
    "tests/records/test_records_format.py",
    "tests/records/test_fast_decode_programs.py",
    "tests/records/test_fast_decode.py",
    "tests/records/test_schema_evolution.py",
)
_LOG_TESTS = (
    "tests/metadata_log/test_container.py",
    "tests/metadata_log/test_log.py",
    "tests/metadata_log/test_integrity.py",
    "tests/metadata_log/test_repair.py",
    "tests/api/cli/test_cli_integrity.py",
    "tests/metadata_log/test_log_settings.py",
    "tests/metadata_log/test_log_spans.py",
    "tests/metadata_log/test_log_index.py",
    "tests/metadata_log/test_log_checkpoint.py",
    "tests/metadata_log/test_container_bounds.py",
    "tests/metadata_log/test_log_extent.py",
    "tests/metadata_log/test_log_verify.py",
    "tests/metadata_log/test_log_tail.py",
    "tests/metadata_log/test_log_schema_check.py",
    "tests/metadata_log/test_stored_log.py",
    "tests/metadata_log/test_log_open.py",
    "tests/metadata_log/test_log_segment.py",
    "tests/metadata_log/test_log_replica.py",
    "tests/metadata_log/test_replica_log.py",
    "tests/metadata_log/test_log_trim.py",
    "tests/metadata_log/test_log_start_snapshot.py",
    "tests/records/test_schema_evolution.py",  # an active segment of an older entry schema on open
)
_CONTROLLER_TESTS = (
    "tests/replay/controller/test_controller.py",
    "tests/replay/controller/test_controller_names.py",
    "tests/replay/controller/test_controller_limits.py",
    "tests/replay/controller/test_controller_errors.py",
    "tests/replay/controller/test_config_values.py",
    "tests/replay/controller/test_controller_topics.py",
    "tests/replay/controller/test_controller_states.py",
    "tests/replay/controller/test_config_ranges.py",
    "tests/replay/controller/test_controller_configs.py",
    "tests/replay/controller/test_controller_brokers.py",
    "tests/replay/controller/test_controller_elections.py",
    "tests/replay/controller/test_config_defs.py",
    "tests/replay/controller/test_namespaces.py",
    "tests/replay/controller/test_partition_reduction.py",
    "tests/replay/controller/test_validation.py",
    "tests/replay/controller/test_placement.py",
)
_SQL_TESTS = (
    "tests/replay/sql/test_snapshot_store_edges.py",
    "tests/replay/sql/test_snapshot_store.py",
    "tests/replay/sql/test_snapshot_security.py",
    "tests/replay/sql/test_migrations.py",
    "tests/system/test_snapshot_damage.py",
)
"""The snapshot store's tests. Left out (a surviving mutant runs every test of its line): the
crash test (real processes), time travel in a trimmed log and the clients' writes through the
service, which run no line of replay/sql that these do not (measured with coverage)."""
_SQL_CONTENT_TESTS = _SQL_TESTS[:3]
"""Rows to image and back: the damage tests (SQLite pages, a dropped PostgreSQL table) and the
migrations run no line of content.py, security_rows.py or ids.py that these do not."""
_AUDIT_TESTS = (
    "tests/replay/audit/test_audit_columns.py",
    "tests/replay/audit/test_audit_session.py",
    "tests/replay/audit/test_audit.py",
    "tests/replay/test_leader_change_record.py",
)
_AUDIT_FAST_TESTS = (
    "tests/replay/audit/test_audit_columns.py",
    "tests/replay/audit/test_audit_source.py",
)
"""In-process audit tests (pyarrow, no JVM): the only ones that see a mutant of the code Spark's
Python workers run (the data source's reader and the columns), which they import from disk."""
_AUDIT_SPARK_TESTS = (
    "tests/replay/audit/test_audit_state.py",
    "tests/replay/audit/test_audit_queries.py",
    "tests/replay/audit/test_audit.py",
)
"""The driver-side audit code: its checks in-process first, then one local session per mutant
child (test_audit_session.py's JVM runs are child processes, which import from disk too)."""
_SECURITY_TESTS = (
    "tests/replay/controller/test_authorizer.py",
    "tests/api/server/test_acls_api.py",
    "tests/api/server/test_authorization.py",
    "tests/api/security/test_scram.py",
    "tests/replay/test_replay_security.py",
)
_RAFT_TESTS = (
    "tests/api/raft/test_raft_core.py",
    "tests/api/raft/test_raft_core_timers_and_ready.py",
    "tests/api/raft/test_raft_handlers.py",
    "tests/api/raft/test_raft_log_view.py",
    "tests/api/raft/test_raft_rules.py",
    "tests/api/raft/test_raft_config.py",
    "tests/api/raft/test_raft_figure_eight.py",
    "tests/api/raft/test_raft_simulation.py",
    "tests/api/raft/test_raft_snapshot_fetch.py",
    "tests/api/raft/test_raft_log_view_start.py",
    "tests/api/raft/test_raft_wiped_voter_epoch.py",
)
SIM_SEEDS = "250"
"""The seeds of `tests/api/raft/test_raft_simulation.py` under mutation (`MLOG_SIM_SEEDS`; CI runs
2,000): a surviving mutant runs every seed test of its line, ~10 s for 2,000. What the seeds
catch the first 250 mostly catch too; where they do not, a unit test is the better fix than
more seeds."""
SWEEPS = (
    "tests/metadata_log/test_integrity.py::test_every_bit_of_the_newest_segments_blocks_and_sync_marker",
    "tests/metadata_log/test_integrity.py::test_every_bit_of_the_newest_segments_header_is_caught_by_its_crc",
    "tests/metadata_log/test_integrity.py::test_schema_text_flips_decode_in_bounded_memory_in_a_capped_child",
    "tests/metadata_log/test_integrity.py::test_a_sample_of_an_older_segments_bits",
    "tests/metadata_log/test_log.py::test_every_record_reads_back_equal_to_what_was_appended",
)
"""Tests left out of the mutant runs of every module but `SWEEP_TARGETS`: seconds each (three
quarters of the log tests' time), and a survivor runs every test of its line. What they sweep
(every bit of a segment) other tests check at chosen points; leaving them out can only count a
mutant as surviving."""

SWEEP_TARGETS = frozenset(
    {"metadata_log/tail.py", "metadata_log/verify.py", "metadata_log/schema_check.py"}
)
"""Modules whose verdicts the sweeps judge through the log: their mutants run them (first runs
without them, and before test_log_tail.py, test_log_verify.py and test_log_schema_check.py
judged the same verdicts directly: tail.py 15.8%, verify.py 73.6%, schema_check.py 55.5%)."""

TARGETS: dict[str, tuple[str, ...]] = {
    # replay/
    **{
        f"replay/delta/{name}.py": (
            *_REPLAY_TESTS,
            "tests/replay/controller/test_namespaces.py",
            "tests/api/service/test_client_writes.py",
        )
        for name in (
            "metadata",
            "features",
            "cluster",
            "namespaces",
            "topics",
            "configs",
            "acls",
            "scram",
            "client_writes",
        )
    },
    "replay/rules.py": _REPLAY_TESTS,
    "replay/errors.py": (*_REPLAY_TESTS, "tests/replay/test_timetravel_trimmed.py"),
    "replay/image.py": (
        *_REPLAY_TESTS,
        "tests/replay/controller/test_namespaces.py",
        "tests/replay/test_timetravel.py",
        "tests/api/service/test_client_writes.py",
        "tests/replay/test_client_writes_image.py",
    ),
    "replay/loader.py": (
        *_REPLAY_TESTS,
        "tests/replay/test_timetravel.py",
        "tests/replay/test_timetravel_trimmed.py",
    ),
    "replay/append.py": ("tests/replay/test_log_replay_checks.py", "tests/api/cli/test_cli.py"),
    # Time travel, diff and history: in-process, through `mlog` and through the private APIs.
    **{
        f"replay/timetravel/{name}.py": (
            "tests/replay/test_timetravel_descriptions.py",
            "tests/replay/test_timetravel_entity_history.py",
            "tests/replay/test_timetravel_image_diff.py",
            "tests/replay/test_timetravel_points.py",
            "tests/replay/test_timetravel_rebuild.py",
            "tests/replay/test_timetravel.py",
            "tests/replay/sql/test_snapshot_store.py",
            "tests/metadata_log/test_log_trim.py",
            "tests/replay/test_timetravel_trimmed.py",
            "tests/replay/test_timetravel_security.py",
            "tests/api/cli/test_cli_ranges.py",
            "tests/api/cli/test_cli_refusals.py",
            "tests/api/cli/test_cli_snapshots.py",
            "tests/api/client/test_remote.py",
        )
        for name in (
            "errors",
            "points",
            "rebuild",
            "image_diff",
            "descriptions",
            "entity_history",
        )
    },
    "replay/changes.py": (
        "tests/replay/test_timetravel_descriptions.py",
        "tests/replay/test_timetravel_entity_history.py",
        "tests/replay/test_timetravel_image_diff.py",
        "tests/replay/test_timetravel.py",
        "tests/replay/test_timetravel_security.py",
    ),
    "replay/timetravel/security.py": (
        "tests/replay/test_timetravel_security.py",
        "tests/replay/test_timetravel.py",
        "tests/replay/test_replay_security.py",
    ),
    # replay/sql/: the snapshot store, on SQLite and PostgreSQL (the fast SQLite cases run
    # first: a mutant stops at its first failing test).
    **{
        f"replay/sql/{name}.py": _SQL_TESTS
        for name in ("models", "revision", "schema", "store", "row_io")
    },
    **{
        f"replay/sql/{name}.py": _SQL_CONTENT_TESTS
        for name in ("content", "errors", "ids", "security_rows")
    },
    # replay/audit/: the reader and the columns run in Spark's Python workers, which import
    # them from disk, never the mutant: only in-process tests judge them. The driver-side
    # modules start one local session per mutant child (the JVM: seconds to tens of seconds).
    "replay/audit/columns.py": _AUDIT_FAST_TESTS,
    "replay/audit/source.py": ("tests/replay/audit/test_audit_source.py",),
    "replay/audit/state.py": _AUDIT_SPARK_TESTS,
    "replay/audit/access.py": _AUDIT_SPARK_TESTS,
    "replay/audit/queries.py": (*_AUDIT_SPARK_TESTS, "tests/replay/test_leader_change_record.py"),
    "replay/audit/session.py": (
        "tests/replay/audit/test_audit_session.py",
        "tests/replay/audit/test_audit.py",
    ),
    "replay/audit/errors.py": _AUDIT_TESTS,
    # The FetchSnapshot form: its wire test, and the catch-up of a real follower through it.
    "api/raft/snapshot_bytes.py": (
        "tests/api/raft/test_snapshot_bytes.py",
        "tests/api/protocol/quorum/test_wire.py",
        "tests/api/raft/test_quorum_snapshot_catch_up.py",
    ),
    # records/
    **{
        f"records/{name}.py": _RECORDS_TESTS
        for name in (
            "codec",
            "schemas",
            "json_form",
            "uuids",
            "avro_array",
            "fast_decode",
            "upcasting",
            "interning",
            "varint",
            "slots",
            "entry",
            "model",
            "errors",
        )
    },
    # `column_plan` is the audit's columnar decoder: its tests are the audit columns' (pyarrow).
    "records/fast_decode.py": (*_RECORDS_TESTS, "tests/replay/audit/test_audit_columns.py"),
    # metadata_log/
    **{
        f"metadata_log/{name}.py": _LOG_TESTS
        for name in (
            "container",
            "segment",
            "log",
            "storage",
            "recovery",
            "reads",
            "reader",
            "active",
            "writer",
            "replica",
            "replica_log",
            "replica_checks",
            "memory_replica",
            "epoch_cache",
            "memory",
            "extent",
            "index",
            "spans",
            "verify",
            "repair",
            "checkpoint",
            "schema_check",
            "epoch",
            "lock",
            "config",
            "errors",
        )
    },
    # Torn-tail classification is what the bit sweeps and the crash tests (real processes
    # killed mid-write) check: tail.py keeps them (SWEEP_TARGETS), at seconds a mutant.
    "metadata_log/tail.py": (*_LOG_TESTS, "tests/system/test_crash.py"),
    # api/raft/core/: the sans-IO core, fed by hand and by the simulation's seeds.
    **{
        f"api/raft/core/{name}.py": _RAFT_TESTS
        for name in (
            "core",
            "machine",
            "handlers",
            "leading",
            "proposals",
            "timers",
            "replication",
            "election",
            "quorum_state",
            "config",
            "ready",
            "roles",
            "states",
            "transfer",
        )
    },
    "api/protocol/quorum/messages.py": (*_RAFT_TESTS, "tests/api/protocol/quorum/test_wire.py"),
    "api/raft/core/snapshot_fetch.py": (*_RAFT_TESTS, "tests/api/protocol/quorum/test_wire.py"),
    # The start snapshot a log trimmed below its first entry keeps (`trim_before`).
    "metadata_log/start_snapshot.py": (
        "tests/metadata_log/test_start_snapshot_file.py",
        "tests/metadata_log/test_log_start_snapshot.py",
        "tests/metadata_log/test_log_trim.py",
        "tests/metadata_log/test_log_replica.py",
    ),
    "api/raft/core/log_view.py": (*_RAFT_TESTS, "tests/metadata_log/test_log_replica.py"),
    # The quorum-state file the shell keeps for the core (api/raft/, beside the core).
    "api/raft/quorum_state_file.py": (
        "tests/api/raft/test_quorum_state_file.py",
        "tests/api/raft/test_raft_rules.py",
    ),
    # replay/controller/
    "replay/controller/placement.py": ("tests/replay/controller/test_placement.py",),
    **{
        f"replay/controller/{name}.py": _CONTROLLER_TESTS
        for name in (
            "topics",
            "brokers",
            "configs",
            "config_values",
            "config_defs",
            "elections",
            "namespaces",
            "partition_reduction",
            "names",
            "states",
            "limits",
            "errors",
        )
    },
    # The security side of the controller: ACLs, their index, the authorizer, credentials (no
    # test of _CONTROLLER_TESTS imports them); and the controller's front (commands,
    # Controller) that every write goes through.
    **{
        f"replay/controller/{name}.py": _SECURITY_TESTS
        for name in ("acl_index", "acls", "authorizer", "credentials")
    },
    "replay/controller/commands.py": (*_SECURITY_TESTS, *_CONTROLLER_TESTS),
    "replay/controller/controller.py": (
        *_SECURITY_TESTS,
        *_CONTROLLER_TESTS,
        "tests/replay/controller/test_controller_front.py",
    ),
}
"""Each module under mutation and the tests that exercise it (kept tight: they run per mutant)."""
