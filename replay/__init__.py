"""Replay: the metadata image built from the log, snapshots and time travel.

The public names are declared once, by the imports below; at run time they are imported from
their modules on first use (PEP 562, `records.exports`), so that importing one module
(`replay.image`) does not import the controller or time travel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.append import append_replayed_batches as append_replayed_batches
    from replay.append import check_batch as check_batch
    from replay.changes import Change as Change
    from replay.controller.controller import Controller as Controller
    from replay.controller.errors import ApiError as ApiError
    from replay.controller.errors import ErrorCode as ErrorCode
    from replay.delta import MetadataDelta as MetadataDelta
    from replay.errors import ReplayError as ReplayError
    from replay.errors import TrimmedLogError as TrimmedLogError
    from replay.image import EMPTY_IMAGE as EMPTY_IMAGE
    from replay.image import MetadataImage as MetadataImage
    from replay.image import Provenance as Provenance
    from replay.image import TopicImage as TopicImage
    from replay.loader import load_image as load_image
    from replay.timetravel import Entity as Entity
    from replay.timetravel import HistoryEntry as HistoryEntry
    from replay.timetravel import TimeTravelError as TimeTravelError
    from replay.timetravel import batch_end as batch_end
    from replay.timetravel import diff as diff
    from replay.timetravel import diff_points as diff_points
    from replay.timetravel import history as history
    from replay.timetravel import history_range as history_range
    from replay.timetravel import image_at as image_at
    from replay.timetravel import travel as travel


# mypy sees the names through the imports above; only the interpreter needs the hook.
if not TYPE_CHECKING:
    from records.exports import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
