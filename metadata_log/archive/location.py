"""Where an archive lives: a directory or an object-store URL, reached through fsspec.

`file:///var/lib/mlog-archive` (or a plain absolute path), `s3://bucket/prefix` (s3fs),
`gs://bucket/prefix` (gcsfs), `hdfs://namenode/path` (pyarrow), and fsspec's `memory://` for
tests. Credentials and endpoints come as each filesystem takes them (for S3: the AWS_*
environment variables, `~/.aws`, an instance role; `AWS_ENDPOINT_URL_S3` for an S3-compatible
store). Names inside an archive are relative paths with `/` (`manifest/…json`).

An object is written whole: on a local filesystem to a temporary name and renamed, on an
object store by one PUT, so a writer killed mid-upload leaves no half object under its name.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path
from typing import Any

from metadata_log.archive.errors import ArchiveError, ArchiveUnreachable

SCHEMES = {
    "file": None,
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "hdfs": "pyarrow",
    "memory": None,
}
"""The URL schemes an archive may use, and the package each needs beyond fsspec."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CHUNK = 4 << 20


def _checked_url(url: str) -> tuple[str, str]:
    """(scheme, url) of an archive URL, checked; a plain absolute path is a `file://` URL."""
    example = "give file:///var/lib/mlog-archive or s3://BUCKET/PREFIX"
    if not url or _CONTROL.search(url):
        raise ArchiveError(f"archive URL {url!r} is empty or holds control characters; {example}")
    if url.startswith("/"):
        url = f"file://{url}"
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ArchiveError(f"archive URL {url!r} has no scheme; {example}")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise ArchiveError(
            f"archive URL {url!r}: scheme {scheme!r} is not one of "
            f"{', '.join(sorted(SCHEMES))}; {example}"
        )
    if scheme == "file" and not rest.startswith("/"):
        raise ArchiveError(f"archive URL {url!r}: a file:// URL needs an absolute path; {example}")
    if scheme != "file" and not rest.strip("/"):
        raise ArchiveError(f"archive URL {url!r} names no bucket or path; {example}")
    return scheme, f"{scheme}://{rest.rstrip('/')}" if scheme != "file" else url.rstrip("/")


class ArchiveLocation:
    """The objects of one archive: read, written whole, listed, checked by hash."""

    def __init__(self, url: str, fs: Any, root: str) -> None:
        self.url = url
        self.fs = fs
        self.root = root
        self.local = scheme_of(url) == "file"

    @classmethod
    def open(cls, url: str, **options: Any) -> ArchiveLocation:
        """The archive at `url` (not contacted yet); `ArchiveError` for a bad URL."""
        scheme, url = _checked_url(url)
        try:
            import fsspec  # noqa: PLC0415 - only a command or server with an archive needs it
        except ImportError:
            raise ArchiveError(
                "an archive needs fsspec: pip install 'metadata-log[archive]'"
            ) from None
        try:
            fs, root = fsspec.core.url_to_fs(url, **options)
        except ImportError:
            package = SCHEMES[scheme]
            raise ArchiveError(
                f"archive URL {url!r} needs the package {package}: pip install {package}"
            ) from None
        except (ValueError, TypeError, OSError) as exc:
            raise ArchiveError(f"archive URL {url!r} cannot be used: {exc}") from None
        return cls(url, fs, root.rstrip("/"))

    def path(self, name: str) -> str:
        """The filesystem path of object `name`."""
        return f"{self.root}/{name}"

    def describe(self, name: str = "") -> str:
        """The URL of object `name` (or of the archive), for messages."""
        return f"{self.url}/{name}" if name else self.url

    # ---------------------------------------------------------------- reading

    def read(self, name: str) -> bytes | None:
        """Object `name`'s bytes, or None if there is none."""
        try:
            data: bytes = self.fs.cat_file(self.path(name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc
        return data

    def sha256(self, name: str) -> tuple[int, str] | None:
        """(size, SHA-256 hex) of object `name` as stored, or None if there is none."""
        digest = hashlib.sha256()
        size = 0
        try:
            with self.fs.open(self.path(name), "rb") as f:
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc
        return size, digest.hexdigest()

    def version(self, name: str) -> str | None:
        """What changes whenever object `name` is written (its ETag, time, size); None: none.

        A copy read and checked before is still the object's bytes while this holds.
        """
        try:
            info = self.fs.info(self.path(name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc
        keys = ("ETag", "etag", "LastModified", "mtime", "size", "ino", "generation")
        return "|".join(f"{k}={info[k]}" for k in keys if info.get(k) is not None)

    def names(self, folder: str) -> list[str]:
        """The names of the objects directly in `folder` (`manifest`), sorted."""
        try:
            listed = self.fs.ls(self.path(folder), detail=False)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(folder)}: {exc}") from exc
        prefix = self.path(folder).split("://")[-1].rstrip("/") + "/"
        out = []
        for entry in listed:
            bare = str(entry).split("://")[-1]
            if bare.startswith(prefix) and "/" not in bare[len(prefix) :]:
                out.append(f"{folder}/{bare[len(prefix) :]}")
        return sorted(out)

    def download(self, name: str, target: Path) -> None:
        """Copy object `name` to the local file `target` (written whole: temporary, rename)."""
        tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            self.fs.get_file(self.path(name), str(tmp))
            os.replace(tmp, target)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    # ---------------------------------------------------------------- writing

    def write(self, name: str, data: bytes) -> None:
        """Write object `name` whole (replacing any)."""
        try:
            if self.local:
                self._write_local(name, lambda tmp: self.fs.pipe_file(tmp, data))
            else:
                self.fs.pipe_file(self.path(name), data)
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc

    def upload(self, name: str, source: Path) -> None:
        """Copy the local file `source` to object `name`, whole (replacing any)."""
        try:
            if self.local:
                self._write_local(name, lambda tmp: self.fs.put_file(str(source), tmp))
            else:
                self.fs.put_file(str(source), self.path(name))
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc

    def _write_local(self, name: str, write: Any) -> None:
        path = self.path(name)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def delete(self, name: str) -> None:
        """Remove object `name` (tests and repairs; an archive itself never deletes)."""
        try:
            self.fs.rm_file(self.path(name))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ArchiveUnreachable(f"{self.describe(name)}: {exc}") from exc


def scheme_of(url: str) -> str:
    """The scheme of a checked archive URL."""
    return url.partition("://")[0]


def file_sha256(path: Path) -> tuple[int, str]:
    """(size, SHA-256 hex) of a local file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
