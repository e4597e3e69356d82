"""What a principal learns of namespaces: their existence only where it may DESCRIBE them.

Issue #31, finding 7: CreateNamespace answered "already exists" and ListNamespaces "does not
exist" to anyone, and a listing counted the namespaces and topics its reader may not see. As
Kafka's CreateTopics answers TOPIC_AUTHORIZATION_FAILED, not TOPIC_ALREADY_EXISTS, for a topic
its requester may not DESCRIBE, a namespace the session may not DESCRIBE counts here as missing.
"""

from __future__ import annotations

from api.server.kafka.authorization import Gate
from api.server.kafka.base import Session
from records.model import AclOperation, ResourceType
from replay.controller.commands import NamespaceInfo
from replay.controller.controller import Controller
from replay.controller.namespaces import validate_namespace_name
from replay.image import MetadataImage, enclosing_namespaces

NAMESPACE = ResourceType.NAMESPACE
CREATE, DESCRIBE = AclOperation.CREATE, AclOperation.DESCRIBE


def require_creatable(gate: Gate, image: MetadataImage, session: Session, name: str) -> None:
    """CreateNamespace's checks: CREATE on each namespace it would create, parents first.

    A namespace the session may not DESCRIBE is checked as if it were missing, so an existing
    one is refused exactly as a missing one the session may not create; one it may create but
    not DESCRIBE is refused too (for DESCRIBE), never answered "already exists".
    """
    for tier in reversed(enclosing_namespaces(name)):
        if image.namespaces.exists(tier) and gate.allows(image, session, DESCRIBE, NAMESPACE, tier):
            continue  # seen by the session: the controller answers as before
        gate.require_namespace(image, session, CREATE, tier)
    if image.namespaces.exists(name):
        gate.require_namespace(image, session, DESCRIBE, name)


def visible_namespaces(
    gate: Gate, image: MetadataImage, session: Session, parent: str, *, recursive: bool
) -> list[NamespaceInfo]:
    """ListNamespaces: the namespaces below `parent` the session may DESCRIBE, counted so.

    A parent the session may not DESCRIBE lists alike whether it exists or not (what is below
    it that the session may see, nothing for a missing one); the counts are of the namespaces
    the session may DESCRIBE and their topics, so a hidden namespace is neither listed nor
    counted, nor are its topics.
    """
    if not gate.on:
        return Controller.list_namespaces(image, parent, recursive=recursive)

    seen: dict[str, bool] = {}

    def describable(name: str) -> bool:
        allowed = seen.get(name)
        if allowed is None:
            allowed = seen[name] = gate.allows(image, session, DESCRIBE, NAMESPACE, name)
        return allowed

    if parent:
        validate_namespace_name(parent)  # a malformed name is refused for what it is
        if not image.namespaces.exists(parent) and not describable(parent):
            return []
    listed = [
        info
        for info in Controller.list_namespaces(image, parent, recursive=recursive)
        if describable(info.name)
    ]
    if not listed:
        return []
    namespaces = image.namespaces
    # Topics are counted by namespace: those of the namespaces the session may DESCRIBE, at
    # and below each one listed (one decision per namespace, none per topic).
    total: dict[str, int] = {}
    for name in namespaces.descendants(parent):
        count = namespaces.topic_counts.get(name, 0)
        if count and describable(name):
            for tier in enclosing_namespaces(name):
                total[tier] = total.get(tier, 0) + count
    return [
        NamespaceInfo(
            name=info.name,
            namespace_id=info.namespace_id,
            topics=info.topics,
            total_topics=total.get(info.name, 0),
            children=sum(1 for child in namespaces.children(info.name) if describable(child)),
        )
        for info in listed
    ]
