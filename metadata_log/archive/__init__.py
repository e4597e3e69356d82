"""The archive: sealed segments kept in a directory or object store, beyond local retention.

The facade: `ArchiveLocation.open(url)` (where it lives), `SegmentArchiver` (a controller's
uploads), `read_manifest` (what it holds), `ArchiveCache` (local copies and `HistoryView`s,
the whole history as one log directory) and `check_archive` (its objects against the
manifest). docs/archive.md says how it is used.
"""

from metadata_log.archive.check import ArchiveCheck, check_archive
from metadata_log.archive.errors import ArchiveDamage, ArchiveError, ArchiveUnreachable
from metadata_log.archive.location import ArchiveLocation
from metadata_log.archive.manifest import Manifest, ManifestEntry, claim, read_manifest
from metadata_log.archive.upload import SegmentArchiver, UploadReport
from metadata_log.archive.view import ArchiveCache, HistoryView

__all__ = [
    "ArchiveCache",
    "ArchiveCheck",
    "ArchiveDamage",
    "ArchiveError",
    "ArchiveLocation",
    "ArchiveUnreachable",
    "HistoryView",
    "Manifest",
    "ManifestEntry",
    "SegmentArchiver",
    "UploadReport",
    "check_archive",
    "claim",
    "read_manifest",
]
