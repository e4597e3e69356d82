"""`KafkaApis`: which handler answers each Kafka API key, in one table.

The handlers live in one module per concern beside this one (`metadata`, `topics`,
`configs`, `partitions`, `acls`, `credentials`); the table holds their bound methods, so
answering a request is one dict lookup and one call, as when they were one class.
`codec.SUPPORTED_VERSIONS` is the list of keys and versions the table must cover (a protocol
test checks every one).
"""

from __future__ import annotations

from api.controller.errors import ApiError, StorageError
from api.protocol import codec
from api.protocol.codec import API_NAMES, KafkaRequest
from api.server.kafka.acls import AclApis
from api.server.kafka.base import ANONYMOUS_SESSION, Handler, Listener, Session, logger
from api.server.kafka.configs import ConfigApis
from api.server.kafka.credentials import CredentialApis
from api.server.kafka.metadata import MetadataApis
from api.server.kafka.partitions import PartitionApis
from api.server.kafka.refusals import refusal
from api.server.kafka.topics import TopicApis
from api.server.sasl import refuse_outside_login
from api.service.service import MetadataService


class KafkaApis:
    """Answers the Kafka admin APIs of `codec.SUPPORTED_VERSIONS` from a service."""

    def __init__(self, service: MetadataService, listener: Listener) -> None:
        self.service = service
        self.listener = listener
        described = MetadataApis(service, listener)
        topics = TopicApis(service, listener)
        configs = ConfigApis(service, listener)
        partitions = PartitionApis(service, listener)
        acls = AclApis(service, listener)
        credentials = CredentialApis(service, listener)
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
            # Logins are answered before dispatch (server.py, sasl.py); these only where none
            # is under way: ILLEGAL_SASL_STATE.
            17: refuse_outside_login,
            36: refuse_outside_login,
        }

    async def handle(
        self, request: KafkaRequest, session: Session = ANONYMOUS_SESSION
    ) -> codec.Answer:
        """The answer to a decoded request.

        A write the service refuses as a whole (storage failed: KAFKA_STORAGE_ERROR; records
        that cannot be stored: INVALID_REQUEST) is answered with that code on every item.
        """
        try:
            return await self._handlers[request.header.api_key](request, session)
        except ApiError as exc:
            answer = refusal(request, exc)
            if answer is None:
                raise
            if not isinstance(exc, StorageError):  # the service logs storage state changes once
                name = API_NAMES.get(request.header.api_key, request.header.api_key)
                logger.info("%s %s refused: %s", session.principal, name, exc)
            return answer
