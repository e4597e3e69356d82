"""Only I/O can fail an append, and I/O failure heals: refusals, storage errors, fail points."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from pathlib import Path

import pytest

from api.cli.main import main
from api.client import AdminClient, RemoteError
from api.server.server import MetadataServer
from api.service.service import MetadataService
from metadata_log.errors import LogError
from metadata_log.log import MetadataLog
from records.model import ConfigRecord, ConfigResourceType, RegisterBrokerRecord, TopicRecord
from records.uuids import Uuid
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreatePartitionsTopic,
    ElectionType,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.errors import ApiError, ErrorCode, StorageError
from tests.support.faults import KINDS, Fault, inject_faults
from tests.support.server_thread import running_server

BROKER_GROUPS = ((1, 2, 3), (4,), (5, 6, 7, 8))
"""The sweep's workload: broker registrations, concurrent within a group (group commit)."""


async def _submit_register(svc: MetadataService, broker_id: int) -> None:
    await svc.submit(
        partial(svc.controller.register_broker, request=RegisterBroker(broker_id=broker_id))
    )


async def _workload(svc: MetadataService) -> tuple[list[int], list[StorageError]]:
    """Run the registrations; which were acknowledged, and the errors the others saw."""
    acked: list[int] = []
    refused: list[StorageError] = []

    async def one(broker_id: int) -> None:
        try:
            await _submit_register(svc, broker_id)
        except StorageError as exc:  # any other exception fails the test: it is not clear
            refused.append(exc)
        else:
            acked.append(broker_id)

    for group in BROKER_GROUPS:
        await asyncio.gather(*(one(b) for b in group))
    return acked, refused


async def _wait_healed(svc: MetadataService) -> None:
    for _ in range(500):
        if not svc.stopped:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the service did not re-open the log after the fault cleared")


def _bad_record(image: object) -> ControllerResult[None]:
    # A value the controller should never let through: the service's last check refuses it.
    return ControllerResult(
        records=(
            RegisterBrokerRecord(broker_id=2**31, incarnation_id=Uuid.random(), broker_epoch=0),
        ),
        response=None,
    )


def test_a_batch_that_cannot_be_encoded_is_refused_and_the_service_goes_on(
    tmp_path: Path,
) -> None:
    with MetadataService.open(tmp_path / "log") as svc:
        end = svc.log.end_offset
        before = svc.image
        with pytest.raises(ApiError) as refused:
            svc.execute(_bad_record)
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        assert "2147483648" in str(refused.value)
        assert svc.log.end_offset == end and svc.image is before and not svc.stopped
        svc.execute(partial(svc.controller.register_broker, request=RegisterBroker(broker_id=1)))
        assert svc.image.cluster.get(1) is not None


async def test_an_unencodable_batch_among_concurrent_ones_fails_alone(tmp_path: Path) -> None:
    svc = MetadataService.open(tmp_path / "log")
    try:
        outcomes = await asyncio.gather(
            _submit_register(svc, 1),
            svc.submit(_bad_record),
            _submit_register(svc, 2),
            return_exceptions=True,
        )
        assert outcomes[0] is None and outcomes[2] is None
        assert isinstance(outcomes[1], ApiError)
        assert outcomes[1].error_code == ErrorCode.INVALID_REQUEST
        await _submit_register(svc, 3)
        assert [b for b in (1, 2, 3) if svc.image.cluster.get(b) is not None] == [1, 2, 3]
    finally:
        await svc.aclose()
    with MetadataService.open(tmp_path / "log") as again:
        assert [b for b in (1, 2, 3) if again.image.cluster.get(b) is not None] == [1, 2, 3]


def _clean_calls(tmp_path: Path) -> int:
    """The I/O calls of the workload without faults (the sweep's range of fail points)."""
    log_dir = tmp_path / "clean"

    async def run() -> int:
        svc = MetadataService.open(log_dir)
        try:
            with inject_faults(log_dir) as faults:
                faults.arm(None)
                acked, refused = await _workload(svc)
                assert not refused and len(acked) == 8
                return faults.calls
        finally:
            await svc.aclose()

    return asyncio.run(run())


async def _one_fail_point(log_dir: Path, fault: Fault) -> None:
    svc = MetadataService.open(log_dir)
    svc.reopen_interval_s = 0.01
    try:
        with inject_faults(log_dir) as faults:
            faults.arm(fault)
            acked, refused = await _workload(svc)
            if not faults.fired:  # e.g. a write fault armed after the last write call
                assert not refused and len(acked) == 8, fault
            for exc in refused:
                assert exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR, exc
                assert "\n" not in str(exc)
            # Reads go on from the committed image, which holds everything acknowledged.
            assert all(svc.image.cluster.get(b) is not None for b in acked), (fault, acked)
            if svc.stopped:
                with pytest.raises(StorageError):
                    await _submit_register(svc, 50)
            faults.clear()
            await _wait_healed(svc)
            await _submit_register(svc, 99)  # healed without a restart
            assert svc.image.cluster.get(99) is not None
    finally:
        await svc.aclose()
    with MetadataService.open(log_dir) as again:  # nothing acknowledged is lost
        missing = [b for b in [*acked, 99] if again.image.cluster.get(b) is None]
        assert not missing, (fault, missing)


def test_every_fail_point_of_a_workload_heals_and_loses_nothing_acknowledged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = _clean_calls(tmp_path)
    assert calls >= 2 * len(BROKER_GROUPS)  # a write and an fdatasync per group at least
    caplog.set_level(logging.INFO, logger="api.service.storage_recovery")
    for at in range(calls):
        for kind in KINDS:
            caplog.clear()
            fault = Fault(kind=kind, at=at)
            log_dir = tmp_path / f"{kind}-{at}"
            asyncio.run(_one_fail_point(log_dir, fault))
            lines = [r for r in caplog.records if r.name == "api.service.storage_recovery"]
            failures = [r for r in lines if r.levelno >= logging.ERROR]
            healed = [r for r in lines if "re-opened" in r.getMessage()]
            if failures:  # one line per state change: failed once, healed once
                assert len(failures) == 1 and len(healed) == 1, (fault, caplog.text)
                assert failures[0].exc_info is None


def test_an_io_error_in_embedded_mode_is_a_storage_error_and_appends_nothing(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    with MetadataService.open(log_dir) as svc:
        end = svc.log.end_offset
        with inject_faults(log_dir) as faults:
            faults.arm(Fault(kind="fsync", at=0))
            with pytest.raises(StorageError) as refused:
                svc.execute(
                    partial(svc.controller.register_broker, request=RegisterBroker(broker_id=1))
                )
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "EIO" in str(refused.value)
        assert svc.image.cluster.get(1) is None
    # The unacknowledged record may be on disk (the write succeeded, the fsync did not); it
    # was never acknowledged, so either is allowed, but the log must open cleanly.
    with MetadataService.open(log_dir) as again:
        assert again.log.end_offset in (end, end + 1)


def test_opening_a_log_on_a_full_disk_is_a_one_line_error(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    MetadataLog.open(log_dir).close()
    with inject_faults(log_dir) as faults:
        faults.arm(Fault(kind="enospc", at=0))
        with pytest.raises(LogError) as refused:
            MetadataLog.open(log_dir)
    text = str(refused.value)
    assert "leader-epoch" in text and "ENOSPC" in text and "\n" not in text
    MetadataLog.open(log_dir).close()  # and once space is back, it opens


async def _writes_during_a_full_disk(server: MetadataServer, log_dir: Path) -> None:
    storage = ErrorCode.KAFKA_STORAGE_ERROR
    async with await AdminClient.connect(server.address) as client:
        (created,) = await client.create_topics([CreatableTopic(name="t", num_partitions=2)])
        assert created.outcome.ok
        server.service.reopen_interval_s = 0.05
        with inject_faults(log_dir) as faults:
            faults.arm(Fault(kind="enospc", at=0))
            # Every write API answers 56 on every item, on the same open connection.
            (refused,) = await client.create_topics([CreatableTopic(name="u", num_partitions=1)])
            assert refused.outcome.error_code == storage, refused
            assert "re-opens the log" in (refused.outcome.error_message or "")
            assert faults.fired
            (deleted,) = await client.delete_topics([TopicRef(name="t")])
            assert deleted.outcome.error_code == storage
            (grown,) = await client.create_partitions(
                [CreatePartitionsTopic(topic=TopicRef(name="t"), count=3)]
            )
            assert grown.outcome.error_code == storage
            topic = ConfigResource(type=ConfigResourceType.TOPIC, name="t")
            legacy = await client.alter_configs(topic, {"retention.ms": "1"})
            assert [int(r.error_code) for r in legacy.responses] == [storage]
            (altered,) = await client.incremental_alter_configs(
                [(topic, [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="1")])]
            )
            assert altered.outcome.error_code == storage
            partition = TopicPartition(topic=TopicRef(name="t"), partition=0)
            with pytest.raises(RemoteError) as elect:
                await client.elect_leaders([partition], ElectionType.PREFERRED)
            assert elect.value.error_code == storage
            with pytest.raises(RemoteError) as reassign:
                await client.alter_partition_reassignments(
                    [Reassignment(partition=partition, replicas=(1, 2))]
                )
            assert reassign.value.error_code == storage
            with pytest.raises(RemoteError) as private_api:
                await client.register_broker(RegisterBroker(broker_id=7))
            assert private_api.value.error_code == storage
            # Reads go on: the committed image, and the log itself (time travel reads it).
            metadata = await client.metadata()
            assert "t" in {t.name for t in metadata.topics}
            await asyncio.sleep(0.2)  # re-open attempts have begun (and fail)
            earlier = await client.image_at(at_offset=2)
            assert earlier.provenance.offset == 2
            entries, _ = await client.fetch_log(0, max_entries=3)
            assert [e.offset for e in entries] == [0, 1, 2]
            faults.clear()
            for _ in range(200):  # healed by itself, no restart
                (again,) = await client.create_topics([CreatableTopic(name="u")])
                if again.outcome.error_code != storage:
                    break
                await asyncio.sleep(0.05)
            assert again.outcome.ok, again


def test_a_server_answers_storage_errors_while_the_disk_is_full_and_heals(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    with running_server(log_dir) as server:
        asyncio.run(_writes_during_a_full_disk(server, log_dir))
        assert not server.service.stopped


def _cli_register(data_dir: Path, broker_id: int) -> int:
    return main(["--data-dir", str(data_dir), "brokers", "register", "--id", str(broker_id)])


@pytest.mark.parametrize("kind", ["enospc", "eio", "short", "fsync"])
@pytest.mark.parametrize("where", ["open", "append"])
def test_an_io_error_in_a_cli_command_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, where: str
) -> None:
    data_dir = tmp_path / "data"
    assert _cli_register(data_dir, 1) == 0
    with inject_faults(data_dir / "log") as clean:  # where the command's calls go
        clean.arm(None)
        assert _cli_register(data_dir, 3) == 0
    family = "sync" if kind == "fsync" else "write"
    calls = [
        i
        for i, (f, target) in enumerate(clean.calls_seen)
        if f == family and target.endswith(".avro") == (where == "append")
    ]
    at = calls[0]  # the open's first write or sync (the leader epoch), or the append's
    capsys.readouterr()
    with inject_faults(data_dir / "log") as faults:
        faults.arm(Fault(kind=kind, at=at))
        code = _cli_register(data_dir, 2)
    err = capsys.readouterr().err
    assert code == 2 and faults.fired, (code, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "ENOSPC" in err or "EIO" in err, err
    with MetadataService.open(data_dir / "log") as again:
        if kind != "fsync" or where == "open":
            # Nothing reached the log: a refused write left at most a torn tail, dropped on open.
            assert again.image.cluster.get(2) is None


def _invalid_utf8_topic(image: object) -> ControllerResult[None]:
    # Only fastavro's write sees a lone surrogate in a config value (replay and the per-record
    # check take it): the log refuses the batch, not the check.
    return ControllerResult(
        records=(
            ConfigRecord(
                resource_type=ConfigResourceType.BROKER,
                resource_name="",
                name="x.y",
                value="a\ud800",
            ),
        ),
        response=None,
    )


async def test_a_batch_only_the_log_refuses_is_invalid_and_the_service_heals(
    tmp_path: Path,
) -> None:
    svc = MetadataService.open(tmp_path / "log")
    svc.reopen_interval_s = 0.01
    try:
        end = svc.log.end_offset
        with pytest.raises(ApiError) as refused:
            await svc.submit(_invalid_utf8_topic)
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        await _wait_healed(svc)
        assert svc.log.end_offset == end and not svc.image.configs.cluster().get("x.y")
        await _submit_register(svc, 1)
        assert svc.image.cluster.get(1) is not None
    finally:
        await svc.aclose()


def _unreplayable(image: object) -> ControllerResult[None]:
    # A topic without its partitions: replay's batch rule refuses it.
    return ControllerResult(
        records=(TopicRecord(name="lonely", topic_id=Uuid.random(), namespace=""),),
        response=None,
    )


async def test_a_batch_replay_refuses_is_invalid_and_nothing_is_written(tmp_path: Path) -> None:
    svc = MetadataService.open(tmp_path / "log")
    try:
        end = svc.log.end_offset
        with pytest.raises(ApiError) as refused:
            await svc.submit(_unreplayable)
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        assert "topic.has-partitions" in str(refused.value)
        assert svc.log.end_offset == end and not svc.image.topics.by_name
        await _submit_register(svc, 1)
        assert svc.image.cluster.get(1) is not None
    finally:
        await svc.aclose()
