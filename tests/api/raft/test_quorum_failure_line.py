"""A quorum node that stops on a failure says what to do (restart) once, whatever failed."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from metadata_log.errors import LogFailedError
from replay.controller.errors import ApiError
from tests.support.quorum_harness import Cluster, create_topic, register

FULL_DISK = LogFailedError(
    f"append failed: {OSError(errno.ENOSPC, 'No space left on device')}. The log accepts no "
    "more writes; fix the storage problem and restart (the log recovers on open)"
)


@pytest.mark.parametrize(
    ("failure", "says"),
    [(FULL_DISK, "fix the storage problem and restart"), (OSError("EIO"), "restart it")],
)
async def test_the_stop_line_says_restart_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, failure: Exception, says: str
) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)

        def fail(*args: object, **kwargs: object) -> int:
            raise failure

        leader.log.write_blocks = fail  # type: ignore[method-assign]
        with pytest.raises(ApiError):
            await create_topic(leader, "never")
        assert leader.failed is not None
        assert leader.failed.count("restart") == 1 and says in leader.failed
        (line,) = [r.getMessage() for r in caplog.records if " stops: " in r.getMessage()]
        assert line.count("restart") == 1
    finally:
        await cluster.stop_all()
