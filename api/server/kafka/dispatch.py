"""`KafkaApis`: which handler answers each Kafka API key, in one table.

The handlers live in one module per concern beside this one (`metadata`, `topics`,
`configs`, `partitions`, `acls`, `credentials`); the table holds their bound methods, so
answering a request is one dict lookup and one call, as when they were one class.
`codec.SUPPORTED_VERSIONS` is the list of keys and versions the table must cover (a protocol
test checks every one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from api.protocol import codec
from api.protocol.codec import API_NAMES, KafkaRequest
from api.protocol.quorum.apis import (
    DESCRIBE_QUORUM_KEY,
    QUORUM_VERSIONS,
)
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings
from api.server.feature_support import FeatureSupport
from api.server.kafka.acls import AclApis
from api.server.kafka.authorization import Gate
from api.server.kafka.base import ANONYMOUS_SESSION, Handler, Listener, Session, logger
from api.server.kafka.brokers import BrokerApis
from api.server.kafka.configs import ConfigApis
from api.server.kafka.credentials import CredentialApis
from api.server.kafka.features import FeatureApis
from api.server.kafka.metadata import MetadataApis
from api.server.kafka.partitions import PartitionApis
from api.server.kafka.quorum import QuorumApis, QuorumEndpoint
from api.server.kafka.refusals import refusal
from api.server.kafka.sole_voter import SOLE_VOTER_VERSIONS, SoleVoter
from api.server.kafka.topics import TopicApis
from api.server.sasl import refuse_outside_login
from api.server.write_ids import pending_write
from api.service.broker_liveness import BrokerLiveness
from api.service.client_writes import CURRENT_WRITE
from api.service.service import MetadataService
from records.model import AclOperation
from replay.controller.authorizer import STANDARD_AUTHORIZER, Authorizer
from replay.controller.errors import ApiError, ErrorCode, StorageError

CLUSTER_CHECKS: dict[int, tuple[AclOperation, bool]] = {
    29: (AclOperation.DESCRIBE, True),  # DescribeAcls
    30: (AclOperation.ALTER, True),  # CreateAcls
    31: (AclOperation.ALTER, True),  # DeleteAcls
    50: (AclOperation.DESCRIBE, False),  # DescribeUserScramCredentials
    51: (AclOperation.ALTER, False),  # AlterUserScramCredentials
    62: (AclOperation.CLUSTER_ACTION, False),  # BrokerRegistration
    63: (AclOperation.CLUSTER_ACTION, False),  # BrokerHeartbeat
    64: (AclOperation.ALTER, False),  # UnregisterBroker (an operator's act: ALTER, as Kafka)
    57: (AclOperation.ALTER, False),  # UpdateFeatures
    56: (AclOperation.CLUSTER_ACTION, False),  # AlterPartition
}
"""APIs checked on the cluster before their handler runs, as Kafka checks them: the operation,
and whether the API needs an authorizer at all (the ACL APIs answer SECURITY_DISABLED without
one, as Kafka's do). A key with no handler in the table is never reached."""


class KafkaApis:
    """Answers the Kafka admin APIs of `codec.SUPPORTED_VERSIONS` from a service.

    With an `authorizer`, each API checks what Kafka's checks (docs/security.md); without one,
    everything is allowed and the ACL APIs answer SECURITY_DISABLED. With a `quorum` endpoint
    the controller quorum's APIs (`api.protocol.quorum.apis.QUORUM_VERSIONS`) are answered too,
    and ApiVersions lists them. With a `sole_voter` instead (a single server: no quorum at
    all), DescribeQuorum alone is answered, as a quorum of one voter (`sole_voter.py`).
    """

    def __init__(
        self,
        service: MetadataService,
        listener: Listener,
        authorizer: Authorizer | None = None,
        quorum: QuorumEndpoint | None = None,
        *,
        liveness: BrokerLiveness | None = None,
        feature_support: FeatureSupport | None = None,
        sole_voter: SoleVoter | None = None,
        broker_bindings: BrokerBindings = NO_BINDINGS,
        quorum_served: Mapping[int, tuple[int, int]] | None = None,
        controllers: frozenset[str] = frozenset(),
    ) -> None:
        """`feature_support` asks the other voters before an upgrade (None: nobody to ask).

        `broker_bindings`: the broker ids each broker principal may act for.
        `quorum_served`: the quorum API versions this listener serves (`api.server.edge`;
        None: every one of them). Who may call them the server's edge decides before this.
        `controllers`: the principals this listener knows as the quorum's controllers (on a
        controller listener): they may describe the quorum whatever the ACLs say.
        """
        self.service = service
        self.liveness = liveness or BrokerLiveness(service)
        """The broker sessions (one per server, shared by its listeners)."""
        self.listener = listener
        self.gate = gate = Gate(authorizer)
        self.features = features = FeatureApis(service, listener, gate, support=feature_support)
        described = MetadataApis(
            service,
            listener,
            gate,
            features=features.feature_fields,
            also_served=SOLE_VOTER_VERSIONS if quorum is None and sole_voter is not None else None,
        )
        topics = TopicApis(service, listener, gate)
        configs = ConfigApis(service, listener, gate)
        partitions = PartitionApis(service, listener, gate)
        acls = AclApis(service, listener, gate)
        credentials = CredentialApis(service, listener, gate)
        brokers = BrokerApis(service, listener, gate, self.liveness, broker_bindings)
        self._handlers: dict[int, Handler] = {
            18: described.api_versions,
            3: described.metadata,
            60: described.describe_cluster,
            75: described.describe_topic_partitions,
            19: topics.create_topics,
            20: topics.delete_topics,
            37: topics.create_partitions,
            32: configs.describe_configs,
            33: configs.alter_configs,
            44: configs.incremental_alter_configs,
            43: partitions.elect_leaders,
            45: partitions.alter_partition_reassignments,
            46: partitions.list_partition_reassignments,
            29: acls.describe_acls,
            30: acls.create_acls,
            31: acls.delete_acls,
            50: credentials.describe_user_scram_credentials,
            51: credentials.alter_user_scram_credentials,
            62: brokers.broker_registration,
            63: brokers.broker_heartbeat,
            64: brokers.unregister_broker,
            56: brokers.alter_partition,
            57: features.update_features,
            # Logins are answered before dispatch (server.py, sasl.py); these only where none
            # is under way: ILLEGAL_SASL_STATE.
            17: refuse_outside_login,
            36: refuse_outside_login,
        }
        if quorum is not None:
            served = dict(QUORUM_VERSIONS) if quorum_served is None else dict(quorum_served)
            quorum_apis = QuorumApis(
                quorum,
                service,
                listener,
                gate,
                features=features.feature_fields,
                served=served,
                controllers=controllers,
            )
            self._handlers[18] = quorum_apis.api_versions
            for key in QUORUM_VERSIONS:
                if key in served:
                    self._handlers[key] = quorum_apis.handle
        elif sole_voter is not None:
            # The same checks and refusals as on a quorum's node, for its one served API.
            self._handlers[DESCRIBE_QUORUM_KEY] = QuorumApis(
                sole_voter, service, listener, gate
            ).handle

    async def handle(
        self, request: KafkaRequest, session: Session = ANONYMOUS_SESSION
    ) -> codec.Answer:
        """The answer to a decoded request.

        A write the service refuses as a whole (storage failed: KAFKA_STORAGE_ERROR; records
        that cannot be stored: INVALID_REQUEST) is answered with that code on every item.
        """
        if request.header.write_id is not None:
            return await self._idempotent(request, session)
        key = request.header.api_key
        try:
            checked = CLUSTER_CHECKS.get(key)
            if checked is not None:
                self._check_cluster(session, *checked)
            return await self._handlers[key](request, session)
        except ApiError as exc:
            answer = refusal(request, exc)
            if answer is None:
                raise
            if not isinstance(exc, StorageError):  # the service logs storage state changes once
                name = API_NAMES.get(request.header.api_key, request.header.api_key)
                logger.info("%s %s refused: %s", session.principal, name, exc)
            return answer

    async def _idempotent(self, request: KafkaRequest, session: Session) -> codec.Answer:
        """`handle` for a request with a write id: the service sees it (`CURRENT_WRITE`)."""
        pending = pending_write(request.header, session.principal)
        if pending is None:  # not a write API: answered as without the id
            return await self.handle(
                replace(request, header=replace(request.header, write_id=None)), session
            )
        token = CURRENT_WRITE.set(pending)
        try:
            return await self.handle(
                replace(request, header=replace(request.header, write_id=None)), session
            )
        finally:
            CURRENT_WRITE.reset(token)

    def _check_cluster(
        self, session: Session, operation: AclOperation, needs_authorizer: bool
    ) -> None:
        """Refuse a request of a `CLUSTER_CHECKS` API the session may not make."""
        if needs_authorizer and not self.gate.on:
            raise ApiError(
                ErrorCode.SECURITY_DISABLED,
                "No Authorizer is configured on the broker; set authorizer.class.name="
                f"{STANDARD_AUTHORIZER} in the server config to use ACLs",
            )
        self.gate.require_cluster(self.service.image, session, operation)
