"""The authorization checks every handler makes: `Gate`, over the server's `Authorizer` or none.

Which API checks what (Kafka's choices, and ours for our own APIs) is in docs/security.md,
"Authorization". With no authorizer (`authorizer.class.name` unset) every check passes, as
before authorization existed. A refusal is an `ApiError` with Kafka's code:
TOPIC_AUTHORIZATION_FAILED (29) for a topic or a namespace (namespaces are part of topic
names; Kafka clients raise `TopicAuthorizationException` for it), CLUSTER_AUTHORIZATION_FAILED
(31) for the cluster. Messages name the principal, the operation and the resource, and the
command that grants it; never whether a topic exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from records.model import AclOperation, ResourceType
from replay.controller.authorizer import CLUSTER_NAME, Authorizer
from replay.controller.commands import ControllerResult, TopicRef
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import clip
from replay.controller.names import empty_tier_error
from replay.image import MetadataImage

if TYPE_CHECKING:  # base imports this module: the Session class is only named here
    from api.server.kafka.base import Session

Item = TypeVar("Item")
R = TypeVar("R")

_FLAGS = {
    ResourceType.TOPIC: "--topic",
    ResourceType.NAMESPACE: "--namespace",
    ResourceType.CLUSTER: "--cluster",
}


def _operation_name(operation: AclOperation) -> str:
    """Kafka's spelling of an operation in kafka-acls.sh (`DescribeConfigs`)."""
    return "".join(part.capitalize() for part in operation.name.split("_"))


def refusal_message(
    session: Session, operation: AclOperation, resource_type: ResourceType, name: str
) -> str:
    """`User:bob may not Delete topic 'orders'; ...how to grant it`."""
    op = _operation_name(operation)
    kind = resource_type.name.lower()
    flag = _FLAGS.get(resource_type, f"--{kind}")
    target = flag if resource_type == ResourceType.CLUSTER else f"{flag} {clip(name)}"
    what = "the cluster" if resource_type == ResourceType.CLUSTER else f"{kind} {clip(name)}"
    return (
        f"{session.principal} may not {op} {what}; an ACL must allow it "
        f"(mlog acls add --allow-principal {session.principal} --operation {op} {target})"
    )


class Gate:
    """The server's authorization checks; every check passes when there is no authorizer."""

    __slots__ = ("authorizer",)

    def __init__(self, authorizer: Authorizer | None = None) -> None:
        self.authorizer = authorizer

    @property
    def on(self) -> bool:
        """Whether an authorizer decides (`authorizer.class.name` is set)."""
        return self.authorizer is not None

    def allows(
        self,
        image: MetadataImage,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether the session may do `operation` on the resource (always, with no authorizer)."""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            image, session.principal, session.host, operation, resource_type, name
        )

    def allows_cluster(
        self, image: MetadataImage, session: Session, operation: AclOperation
    ) -> bool:
        """Whether the session may do `operation` on the cluster."""
        return self.allows(image, session, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def require_cluster(
        self, image: MetadataImage, session: Session, *operations: AclOperation
    ) -> None:
        """Refuse (CLUSTER_AUTHORIZATION_FAILED) unless one of `operations` is allowed."""
        if any(self.allows_cluster(image, session, op) for op in operations):
            return
        raise ApiError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            refusal_message(session, operations[0], ResourceType.CLUSTER, CLUSTER_NAME),
        )

    def topic_refusal(
        self, image: MetadataImage, session: Session, operation: AclOperation, name: str
    ) -> ApiError | None:
        """The TOPIC_AUTHORIZATION_FAILED error for a topic name, or None if it is allowed.

        A name with an empty namespace tier (`:t`) is refused as invalid before any ACL is
        asked: it is no topic's name, and no ACL can be meant for it.
        """
        invalid = empty_tier_error(name)
        if invalid is not None:
            return invalid
        if self.allows(image, session, operation, ResourceType.TOPIC, name):
            return None
        return ApiError(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            refusal_message(session, operation, ResourceType.TOPIC, name),
        )

    def require_topic(
        self, image: MetadataImage, session: Session, operation: AclOperation, name: str
    ) -> None:
        """Refuse (TOPIC_AUTHORIZATION_FAILED) unless `operation` is allowed on the topic."""
        error = self.topic_refusal(image, session, operation, name)
        if error is not None:
            raise error

    def require_namespace(
        self, image: MetadataImage, session: Session, operation: AclOperation, name: str
    ) -> None:
        """Refuse (TOPIC_AUTHORIZATION_FAILED) unless `operation` is allowed on the namespace.

        Its chain included: a namespace's ACLs and those of the namespaces above it.
        """
        if not self.allows(image, session, operation, ResourceType.NAMESPACE, name):
            raise ApiError(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                refusal_message(session, operation, ResourceType.NAMESPACE, name),
            )


def name_of(image: MetadataImage, ref: TopicRef) -> str | None:
    """The name a topic reference is authorized under: its name, or its topic's by id.

    None for an id no topic has: the controller answers UNKNOWN_TOPIC_ID for it (an id is not
    a name a principal could be refused on, and Kafka does not hide ids).
    """
    if ref.name is not None:
        return ref.name
    if ref.topic_id is None:
        return None
    topic = image.topics.get(ref.topic_id)
    return None if topic is None else topic.qualified_name


def run_gated(
    items: Sequence[Item],
    refusal: Callable[[Item], ApiError | None],
    run: Callable[[list[Item]], ControllerResult[list[R]]],
    refused_result: Callable[[Item, ApiError], R],
) -> ControllerResult[list[R]]:
    """A per-item controller command run on the items allowed; the others answer their refusal.

    `run` gets the allowed items (possibly none) and answers one result per item in order;
    the refused items' results (`refused_result`) take their places, so the answer keeps the
    request's order. A refused item writes nothing.
    """
    errors = [refusal(item) for item in items]
    if all(error is None for error in errors):
        return run(list(items))
    result = run([item for item, error in zip(items, errors, strict=True) if error is None])
    done = iter(result.response)
    return ControllerResult(
        records=result.records,
        response=[
            next(done) if error is None else refused_result(item, error)
            for item, error in zip(items, errors, strict=True)
        ],
    )
