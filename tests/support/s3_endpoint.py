"""An S3-compatible endpoint for the tests: moto's server on 127.0.0.1, a free port, a bucket.

`S3Endpoint.start()` runs moto's S3 server (`moto.server.ThreadedMotoServer`, its werkzeug
server on a thread of this process) on a port the kernel picks, creates a bucket and gives
the environment any boto client needs to reach it (`AWS_ENDPOINT_URL_S3`, test credentials, a
region). Processes that read it (an `mlog` command, Spark's executors) take that environment;
nothing in the code under test knows it talks to moto. The fixture `s3_endpoint` in
tests/conftest.py starts one per test session and stops it after.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ACCESS_KEY_ID = "mlog-test-key"
SECRET_ACCESS_KEY = "mlog-test-secret"  # moto accepts any pair; these are no one's credentials
REGION = "us-east-1"


@dataclass(slots=True)
class S3Endpoint:
    """A running moto S3 server and the bucket made in it."""

    url: str
    bucket: str
    _server: Any = field(repr=False)

    @classmethod
    def start(cls) -> S3Endpoint:
        """Start the server on 127.0.0.1 (a free port) and create a bucket in it."""
        from moto.server import ThreadedMotoServer

        # werkzeug logs every request on stderr: a test's output would drown in them.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = cls(
            url=f"http://{host}:{port}", bucket=f"mlog-{uuid.uuid4().hex[:12]}", _server=server
        )
        try:
            endpoint.filesystem().mkdir(endpoint.bucket)
        except BaseException:
            server.stop()
            raise
        return endpoint

    def stop(self) -> None:
        """Stop the server (its objects go with it)."""
        self._server.stop()

    @property
    def env(self) -> dict[str, str]:
        """The environment a boto (s3fs) client needs to reach the endpoint."""
        return {
            "AWS_ENDPOINT_URL_S3": self.url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def archive_url(self, prefix: str) -> str:
        """An `s3://` archive URL under `prefix` in the bucket."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def filesystem(self) -> Any:
        """An s3fs filesystem of the endpoint, not cached (for setting up and changing objects)."""
        import s3fs

        return s3fs.S3FileSystem(
            key=ACCESS_KEY_ID,
            secret=SECRET_ACCESS_KEY,
            endpoint_url=self.url,
            skip_instance_cache=True,
        )


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set in os.environ while the block runs, the previous values put back after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
