"""An entity's page: every entry that touched a topic, namespace, broker or user.

What `mlog history` answers (`Metadata.history`, `replay.timetravel.history`): a topic by name
is followed through every incarnation (a re-created topic is a new id, and each entry names
its incarnation), a broker through its registrations, configs and the partitions that name
it, a user through its credentials and the ACLs for it. The URL names the entity by one
parameter (`topic`, `topic_id`, `namespace`, `broker`, `user`), and `gt`/`lte`/`limit` bound
the entries as the CLI's range flags do.

A topic's page also charts it over the page's entries (`charts.entity_series`): its partitions,
under-replicated and offline partitions and ISR sizes, from a bounded number of images.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from api.console.charts import Drawn, entity_charts, entity_series
from api.console.errors import BadInput
from api.console.timeline import MAX_FILTER, OFFSET_MAX, iso_time, optional_int_param
from api.python_api import Metadata
from records.uuids import Uuid
from replay.timetravel import Entity, HistoryEntry, TimeTravelError

KINDS = ("topic", "topic_id", "namespace", "broker", "user")
"""The parameters that name an entity."""

MAX_ENTRIES = 1000
"""Entries on one page unless `limit` says otherwise (and at most)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EntityPage:
    """The entries of one entity's page."""

    kind: str
    name: str
    entries: list[tuple[HistoryEntry, str]]
    """Each entry and its time as text."""
    incarnations: list[str]
    """The topic ids the entries belong to, in order of first appearance."""
    next_gt: int | None
    """The `gt` of the next page, when this one is full."""
    charts: list[Drawn]
    """A topic's charts over the page's entries (none for other entities)."""


def parse_entity(params: Mapping[str, str]) -> tuple[str, Entity]:
    """The entity a URL names; `BadInput` unless exactly one parameter names one."""
    given = [(k, params[k].strip()) for k in KINDS if params.get(k, "").strip()]
    if len(given) != 1:
        raise BadInput(
            "name one entity: topic=NAME, topic_id=ID, namespace=NAME, broker=ID or user=NAME"
        )
    kind, text = given[0]
    if len(text) > MAX_FILTER:
        raise BadInput(f"{kind} is {len(text)} characters long: at most {MAX_FILTER}")
    try:
        if kind == "topic_id":
            return kind, Entity(topic_id=Uuid.parse(text))
        if kind == "broker":
            broker = int(text)
            if not 0 <= broker <= 2**31 - 1:
                raise ValueError("out of range")
            return kind, Entity(broker=broker)
    except ValueError:
        raise BadInput(f"{kind}={text[:40]!r} is not a {kind.replace('_', ' ')}") from None
    if kind == "topic":
        return kind, Entity(topic=text)
    if kind == "namespace":
        return kind, Entity(namespace=text)
    return kind, Entity(user=text)


def read_entity(metadata: Metadata, params: Mapping[str, str]) -> EntityPage:
    """The entity page of a URL's parameters (blocking: run on a worker thread)."""
    kind, entity = parse_entity(params)
    gt = optional_int_param(params, "gt", low=-1, high=OFFSET_MAX)
    lte = optional_int_param(params, "lte", low=-1, high=OFFSET_MAX)
    limit = optional_int_param(params, "limit", low=1, high=MAX_ENTRIES) or MAX_ENTRIES
    try:
        found = metadata.history(entity, gt=gt, lte=lte, limit=limit)
    except TimeTravelError as exc:
        raise BadInput(str(exc)) from None
    incarnations: list[str] = []
    for item in found:
        if item.topic_id is not None and item.topic_id not in incarnations:
            incarnations.append(item.topic_id)
    charts: list[Drawn] = []
    if kind in ("topic", "topic_id") and found:
        samples = entity_series(metadata, entity.topic or "", entity.topic_id, found)
        charts = entity_charts(samples)
    return EntityPage(
        kind=kind,
        name=params[kind].strip(),
        entries=[(item, iso_time(item.timestamp)) for item in found],
        incarnations=incarnations if kind in ("topic", "namespace") else [],
        next_gt=found[-1].offset if len(found) == limit else None,
        charts=charts,
    )
