"""What ImageAt shows a principal of the present image: what it may DESCRIBE, nothing more.

Issue #31, finding 6: the log-reading APIs showed every topic, config, namespace, ACL and stored
write answer to a principal with DESCRIBE on the cluster. The raw log and its past (FetchLog,
ImageAt at a past point, Diff, History) need CLUSTER_ACTION, as Kafka's `__cluster_metadata`
does. The image *now* is served to everyone, filtered as Kafka's per-resource APIs filter it:

- features and brokers to everyone (Kafka's ApiVersions and Metadata show them to anyone),
  but a broker's epoch and incarnation id only with DESCRIBE on the cluster (`hides_brokers`:
  they are what a forged BrokerHeartbeat needs besides the right; issue #54);
- a topic, its partitions and a pending partition deletion where the principal may DESCRIBE
  the topic (Metadata);
- a config where it may DESCRIBE_CONFIGS the resource: a topic's on the topic, a namespace's on
  the namespace, the cluster's and a broker's on the cluster (DescribeConfigs);
- a namespace where it may DESCRIBE it (ListNamespaces), and the namespaces enclosing any
  namespace or topic shown (their names are in the shown names anyway);
- ACLs and credentials (redacted, as everywhere) with DESCRIBE on the cluster (DescribeAcls,
  DescribeUserScramCredentials);
- the clients' stored write answers never: they are the service's bookkeeping, and another
  principal's answer is not the reader's business.

A principal with CLUSTER_ACTION, a super user, and everyone on a server without an authorizer
get the whole image (broker epochs and incarnation ids still only with DESCRIBE on the
cluster, or without an authorizer). Each shown part is what replay needs to rebuild it (a
topic's namespace comes with it), so the client rebuilds an image from the records as it
always has.
"""

from __future__ import annotations

from collections.abc import Iterator

from api.server.kafka.authorization import Gate
from api.server.kafka.base import Session
from records.model import AclOperation, ConfigResourceType, Record, ResourceType
from replay.image import MetadataImage, enclosing_namespaces

DESCRIBE, DESCRIBE_CONFIGS = AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS


def sees_everything(gate: Gate, image: MetadataImage, session: Session) -> bool:
    """Whether the session reads the whole image: no authorizer, or CLUSTER_ACTION."""
    return not gate.on or gate.allows_cluster(image, session, AclOperation.CLUSTER_ACTION)


def hides_brokers(gate: Gate, image: MetadataImage, session: Session) -> bool:
    """Whether broker epochs and incarnation ids are hidden from the session.

    They are where an authorizer decides and the session may not DESCRIBE the cluster
    (`time_travel.without_broker_keys`). Every answer that carries them asks here: ImageAt
    (now and past), FetchLog, Diff, History.
    """
    return gate.on and not gate.allows_cluster(image, session, DESCRIBE)


def visible_records(gate: Gate, image: MetadataImage, session: Session) -> Iterator[Record]:
    """The records of `image.write()` the session may DESCRIBE, in the same order.

    Credentials are yielded as stored: the caller redacts every record it sends.
    """
    if sees_everything(gate, image, session):
        yield from image.write()
        return
    topics = [
        topic
        for topic in image.topics.sorted()
        if gate.allows(image, session, DESCRIBE, ResourceType.TOPIC, topic.qualified_name)
    ]
    shown_namespaces = {
        name
        for name in image.namespaces.by_name
        if gate.allows(image, session, DESCRIBE, ResourceType.NAMESPACE, name)
    }
    for name in list(shown_namespaces) + [topic.namespace for topic in topics]:
        shown_namespaces.update(enclosing_namespaces(name))
    cluster_describe = gate.allows_cluster(image, session, DESCRIBE)

    yield from image.features.write()
    yield from image.cluster.write()
    for namespace in image.namespaces.ordered():
        if namespace.name in shown_namespaces:
            yield namespace
    for topic in topics:
        yield from topic.write()
    shown_topics = {topic.qualified_name for topic in topics}
    cluster_configs = gate.allows_cluster(image, session, DESCRIBE_CONFIGS)
    for kind, name in sorted(image.configs.resources):
        values = image.configs.resources[(kind, name)]
        if kind == ConfigResourceType.TOPIC:
            shown = name in shown_topics and gate.allows(
                image, session, DESCRIBE_CONFIGS, ResourceType.TOPIC, name
            )
        elif kind == ConfigResourceType.NAMESPACE:
            shown = name in shown_namespaces and gate.allows(
                image, session, DESCRIBE_CONFIGS, ResourceType.NAMESPACE, name
            )
        else:
            shown = cluster_configs
        if shown:
            yield from image.configs.write_resource(kind, name, values)
    if cluster_describe:
        yield from image.scram.write()
        yield from image.acls.write()
