"""Answering one event of a connection: the login, forwarding, the edge, the handlers, metrics.

Every connection's events come here one at a time, in order (`Channel`). A connection that has
not logged in is answered by `Logins`; a write on a quorum node that does not lead goes to the
leader (`WriteForwarding`); a quorum request the edge does not admit on its listener is refused
before any handler runs (`Edge`); an Envelope is opened (`EnvelopeOpener`); the rest goes to the
Kafka handlers of the connection's listener (`KafkaApis`) or to our private APIs. Each answer is
counted by API and error when metrics are on. A handler that fails closes only its connection,
with a logged reason.
"""

from __future__ import annotations

import logging
import time

from api.protocol import codec
from api.protocol.codec import API_NAMES, KafkaRequest, encode_response
from api.protocol.connection import Close, Event, PrivateRequest, Reply, Request, SaslToken
from api.protocol.private import PRIVATE_APIS
from api.server.channel import Channel
from api.server.edge import Edge, refused_answer
from api.server.forwarded_writes import WriteForwarding
from api.server.forwarding import ENVELOPE_KEY
from api.server.kafka.dispatch import KafkaApis
from api.server.login import Logins
from api.server.metrics import ServerMetrics, answer_error, envelope_labels
from api.server.private_apis import PrivateApis
from replay.controller.errors import ApiError

logger = logging.getLogger("api.server")


class Answers:
    """Answers each event of every connection, by the handlers of the listener it came in on."""

    def __init__(
        self,
        *,
        apis: dict[str, KafkaApis],
        logins: Logins,
        edge: Edge | None,
        forwarding: WriteForwarding,
        private_apis: PrivateApis,
        metrics: ServerMetrics | None,
    ) -> None:
        """`apis` holds the Kafka handlers of each listener by its name, as listeners bind."""
        self._apis = apis
        self._logins = logins
        self._edge = edge
        self._envelopes = forwarding.envelopes
        # A single server has no forwarder: no coroutine is made per request to learn that.
        self._forwarding = forwarding if forwarding.forwarder is not None else None
        self._private_apis = private_apis
        self._metrics = metrics

    async def answer(self, event: Event, channel: Channel) -> bool:
        """Answer one event on `channel`; False when the connection must close."""
        if channel.sasl is not None:
            return await self._logins.step(event, channel, channel.sasl, self.answer)
        if (
            self._forwarding is not None  # a quorum's node
            and isinstance(event, Request | PrivateRequest)
            and await self._forwarding.answered(event, channel)
        ):
            return True
        metrics = self._metrics
        if isinstance(event, Request):
            header = event.request.header
            apis = self._apis[channel.listener]
            started = time.perf_counter() if metrics is not None else 0.0
            try:
                refused = self._refused_at_edge(event.request, channel)
                if refused is not None:
                    body = refused
                elif header.api_key == ENVELOPE_KEY:  # only decoded on the quorum's listeners
                    body = await self._envelopes.open(
                        event.request, channel.session, channel.listener
                    )
                else:
                    body = await apis.handle(event.request, channel.session)
            except Exception:
                name = API_NAMES.get(header.api_key, str(header.api_key))
                if metrics is not None:
                    seconds = time.perf_counter() - started
                    metrics.requests.observe(name, "UNKNOWN_SERVER_ERROR", seconds)
                logger.exception(
                    "closing %s: %s v%d failed", channel.peer, name, header.api_version
                )
                return False
            channel.write(encode_response(header.correlation_id, body))
            if metrics is not None:
                seconds = time.perf_counter() - started
                if header.api_key == ENVELOPE_KEY:  # by the write inside (issue #54, finding 7)
                    labels = envelope_labels(event.request.body, body)
                else:
                    labels = API_NAMES.get(header.api_key, str(header.api_key)), answer_error(body)
                metrics.requests.observe(*labels, seconds)
        elif isinstance(event, Reply):
            channel.write(event.data)
        elif isinstance(event, PrivateRequest):
            return await self._private(event, channel)
        elif isinstance(event, Close):
            logger.warning("closing connection from %s: %s", channel.peer, event.reason)
            return False
        elif isinstance(event, SaslToken):  # pragma: no cover - only read while logging in
            return False
        return True

    async def _private(self, event: PrivateRequest, channel: Channel) -> bool:
        """Answer one of our private APIs; False when its handler failed."""
        metrics = self._metrics
        header = event.header
        started = time.perf_counter() if metrics is not None else 0.0
        try:
            channel.write(await self._private_apis.handle(header, event.body, channel.session))
            if metrics is not None:
                seconds = time.perf_counter() - started
                metrics.requests.observe(PRIVATE_APIS[header.api_key].name, "NONE", seconds)
        except Exception:
            if metrics is not None:
                seconds = time.perf_counter() - started
                name = PRIVATE_APIS[header.api_key].name
                metrics.requests.observe(name, "UNKNOWN_SERVER_ERROR", seconds)
            logger.exception(
                "closing %s: %s v%d failed",
                channel.peer,
                PRIVATE_APIS[header.api_key].name,
                header.api_version,
            )
            return False
        return True

    def _refused_at_edge(self, request: KafkaRequest, channel: Channel) -> codec.Answer | None:
        """The refusal of a quorum request the edge does not admit (None: admitted)."""
        edge = self._edge
        if edge is None:
            return None
        try:
            edge.check(request.header.api_key, channel.listener, channel.session)
        except ApiError as exc:
            logger.info(
                "refused %s from %s (%s) on listener %s: %s",
                API_NAMES.get(request.header.api_key, request.header.api_key),
                channel.session.principal,
                channel.peer,
                channel.listener,
                exc.message,
            )
            return refused_answer(request, exc)
        return None
