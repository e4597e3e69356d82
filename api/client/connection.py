"""The client's connection: connect, negotiate versions, pipeline requests, match answers.

One TCP connection, asyncio streams only. Requests may be pipelined: the server answers a
connection's requests in order, so answers are matched to requests by correlation id in the
order they were sent. On connect the client asks ApiVersions and then uses, for each API, the
newest version both sides speak. `request` sends any Kafka API (kio entities in and out) and
`call` any of our own (`api.protocol.private`); a refused private request raises
`RemoteError` with the code and the text the embedded CLI would print. The API methods
themselves are `AdminClient`'s (`api.client.admin`).

With a `ClientSecurity` (`api.security.client_config`), `connect` first does what its
`security.protocol` asks, before any other request: TLS (SSL, SASL_SSL), then, after
ApiVersions, a SASL login (SaslHandshake v1, then SaslAuthenticate with the mechanism's
tokens) as Kafka's clients do. A refused login is one `ClientError` with the server's message.

A setup deadline (`setup_timeout_ms`, or the client config's `socket.connection.setup.timeout.ms`)
bounds the connect, the TLS handshake and the ApiVersions answer together: a server whose kernel
accepts but whose process never answers (hung, stopped) fails in that time with
`ConnectionSetupTimeout`, so a bootstrap list goes on to its next server.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from api.cancellation import cancel_and_wait
from api.protocol import codec, private
from api.protocol.codec import SUPPORTED_VERSIONS, ProtocolError, build, request_class
from api.protocol.private import PRIVATE_VERSIONS, PrivateApi
from api.security.errors import SaslClientError
from records.errors import MetadataLogError
from replay.controller.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from api.security.client_config import ClientSecurity

DEFAULT_TIMEOUT_MS = 30_000
"""The `timeout_ms` sent with writes, and how long the client waits for any answer."""

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SASL_VERSIONS = {SASL_HANDSHAKE_KEY: (1, 1), SASL_AUTHENTICATE_KEY: (0, 2)}
"""The versions of the SASL APIs this client sends: SaslHandshake v1 (v0 would mean raw
tokens without Kafka framing), SaslAuthenticate v0-2. Only `connect` sends them."""

_SASL_NAMES = {SASL_HANDSHAKE_KEY: "SaslHandshake", SASL_AUTHENTICATE_KEY: "SaslAuthenticate"}
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class ClientError(MetadataLogError):
    """The connection failed or the server answered something this client cannot read."""


class ConnectionSetupTimeout(ClientError):
    """The server did not connect, finish TLS and answer ApiVersions within the setup deadline."""


class ConnectionLost(ClientError):
    """A request's answer did not come: the connection failed or closed, or it came too late.

    The request may or may not have reached the server and been applied: a write is safe to
    send again only with its write id (`AdminClient` does so).
    """


CLOSE_WAIT_S = 1.0
"""How long closing a connection waits for the peer's side of the close (TLS's close_notify)."""


class RemoteError(ApiError):
    """The server refused a request; `str()` is what the embedded CLI prints for it."""

    def __init__(self, error_code: int, text: str) -> None:
        code = known_error_code(error_code)
        super().__init__(code, text)
        self.args = (text,)
        self.text = text

    def __str__(self) -> str:
        return self.text


def known_error_code(value: int) -> ErrorCode:
    """The `ErrorCode` of a code from the wire; `UNKNOWN_SERVER_ERROR` for one we do not know."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def parse_bootstrap(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9092`) -> (host, port); `ClientError` says what is wrong."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    # ASCII digits only ('²'.isdigit() holds, int('²') raises); no control characters or
    # spaces in the host, which would reach the resolver and every message naming it.
    port_ok = port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536
    if not sep or not host or not port_ok or not host.isprintable() or " " in host:
        raise ClientError(
            f"bootstrap server {text!r} is not HOST:PORT (for example 127.0.0.1:9092)"
        )
    return host, int(port_text)


def login_user(security: ClientSecurity) -> str:
    """The user name a client config logs in as (for messages; never the password)."""
    return security.username or ""


def _printable(text: str) -> str:
    """Text from the server for a one-line message: control characters dropped, shortened."""
    clean = "".join(c if c.isprintable() else " " for c in text).strip()
    return clean if len(clean) <= 300 else clean[:300] + "..."


async def _open(
    host: str, port: int, context: ssl.SSLContext | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if context is None:
        return await asyncio.open_connection(host, port)
    return await asyncio.open_connection(host, port, ssl=context, server_hostname=host)


def _connect_error(
    host: str, port: int, exc: BaseException, context: ssl.SSLContext | None
) -> ClientError:
    """The one-line error of a failed connect or TLS handshake."""
    if context is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            reason = _printable(str(exc.verify_message or exc.reason or exc))
            hint = (
                "; set ssl.endpoint.identification.algorithm= (empty) to skip the host-name "
                "check, or connect by a name the certificate holds"
                if "hostname" in reason.lower() or "ip address" in reason.lower()
                else "; give the CA that signed it in ssl.ca.location"
            )
            return ClientError(
                f"TLS with {host}:{port} failed: the server's certificate is not trusted "
                f"({reason}){hint}"
            )
        if isinstance(exc, ssl.SSLError):
            return ClientError(
                f"TLS handshake with {host}:{port} failed ({_printable(str(exc.reason or exc))});"
                " is its listener SSL or SASL_SSL?"
            )
        if isinstance(exc, ConnectionResetError | BrokenPipeError | asyncio.IncompleteReadError):
            return ClientError(
                f"TLS handshake with {host}:{port} failed: the server closed the connection; "
                "is its listener SSL or SASL_SSL, and does it want a client certificate?"
            )
        if isinstance(exc, TimeoutError):
            return ClientError(
                f"no TLS handshake with {host}:{port} in time; is its listener SSL or SASL_SSL?"
            )
    return ClientError(
        f"cannot connect to {host}:{port} ({str(exc) or 'timed out'}); is `mlog serve` running "
        "there?"
    )


_BEFORE_LOGIN = frozenset({codec.API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
"""The APIs a listener answers before a login (a close after them may be a login wanted)."""


@dataclass(slots=True)
class _Pending:
    api_key: int
    correlation_id: int
    decode: Callable[[bytes], Any]
    future: asyncio.Future[Any]


class ClientConnection:
    """One pipelined connection to `mlog serve` (see the module docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self._ids = itertools.count(1)
        self._pending: deque[_Pending] = deque()
        self._versions: dict[int, tuple[int, int]] = {}
        self._receiver = asyncio.create_task(self._receive())
        self._closed = False
        self._ended = "the server closed the connection"
        """Why reading ended, for the requests that come after."""
        self._secured = False
        self._answered = False
        """Whether a request other than ApiVersions or a login was answered (a close after it
        is no TLS or login problem: the server took this client, then went away)."""
        self.address: str | None = None
        """`HOST:PORT` this connection was opened to (None: made from streams)."""
        self.security: ClientSecurity | None = None

    @classmethod
    async def connect(
        cls,
        bootstrap: str,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        security: ClientSecurity | None = None,
        setup_timeout_ms: int | None = None,
    ) -> Self:
        """Connect to `HOST:PORT`, secure the connection as `security` says, learn the versions.

        Without `security` (or with PLAINTEXT) the connection is plain TCP and anonymous.
        `setup_timeout_ms` (default: `security.setup_timeout_ms`; None: no deadline but each
        step's `timeout_ms`) bounds the connect, TLS and the ApiVersions answer together:
        `ConnectionSetupTimeout` past it. The SASL login after it has the request timeout (a
        server's key derivations queue under a flood of logins; the server answered already).
        """
        host, port = parse_bootstrap(bootstrap)
        if setup_timeout_ms is None and security is not None:
            setup_timeout_ms = security.setup_timeout_ms
        set_up = cls._set_up(
            host=host,
            port=port,
            bootstrap=bootstrap,
            client_id=client_id,
            timeout_ms=timeout_ms,
            security=security,
        )
        if setup_timeout_ms is None:
            client = await set_up
        else:
            try:
                async with asyncio.timeout(setup_timeout_ms / 1000):
                    client = await set_up
            except TimeoutError:
                raise ConnectionSetupTimeout(
                    f"{bootstrap} accepted no connection, or did not answer ApiVersions, within "
                    f"{setup_timeout_ms} ms (socket.connection.setup.timeout.ms); is it hung?"
                ) from None
        try:
            if security is not None and security.protocol.sasl:
                await client._authenticate(security)
        except BaseException:
            await client.close()
            raise
        return client

    @classmethod
    async def _set_up(
        cls,
        *,
        host: str,
        port: int,
        bootstrap: str,
        client_id: str,
        timeout_ms: int,
        security: ClientSecurity | None,
    ) -> Self:
        """Connect, TLS if asked, ApiVersions: a connection that answered its first request."""
        tls = security is not None and security.protocol.tls
        context = security.ssl_context() if security is not None and tls else None
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                reader, writer = await _open(host, port, context)
        except (OSError, TimeoutError) as exc:
            raise _connect_error(host, port, exc, context) from None
        client = cls(reader, writer, client_id=client_id, timeout_ms=timeout_ms)
        client.address = bootstrap
        client.security = security
        client._secured = security is not None and (tls or security.protocol.sasl)
        try:
            await client._negotiate()
        except BaseException:
            await client.close()
            raise
        return client

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        """Whether the connection was closed, or its reading ended (the server closed it)."""
        return self._closed or self._receiver.done()

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with `ClientError`."""
        if self._closed:
            return
        self._closed = True
        try:
            # The receiver's own end (cancelled, or its error, which failed the requests
            # already) is not raised here, while a cancellation of the caller is: a task
            # cancelled in a close must not go on (api/cancellation.py).
            await cancel_and_wait(self._receiver)
        finally:
            self._fail_pending(ConnectionLost("the connection is closed"))
            self._writer.close()
        # A TLS close waits for the peer's close_notify: a stopped peer (SIGSTOP, a hung
        # host) would hold the caller for asyncio's SSL shutdown timeout (30 s), so after a
        # short wait the socket is dropped instead.
        try:
            async with asyncio.timeout(CLOSE_WAIT_S):
                await self._writer.wait_closed()
        except Exception:
            self._writer.transport.abort()
        except asyncio.CancelledError:
            self._writer.transport.abort()
            raise

    # ------------------------------------------------------------------ transport

    async def _negotiate(self) -> None:
        body = build(
            request_class(codec.API_VERSIONS_KEY, 3),
            client_software_name="metadata-log",
            client_software_version="1",
        )
        response = await self._kafka(body)
        if int(response.error_code) != 0:
            raise ClientError(f"ApiVersions failed with error {int(response.error_code)}")
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def _sasl_version(self, api_key: int) -> int:
        """The version of a SASL API to send: the newest both sides speak (SASL_VERSIONS)."""
        ours = SASL_VERSIONS[api_key]
        theirs = self._versions.get(api_key)
        if theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise ClientError(
                f"the server does not answer {_SASL_NAMES[api_key]} (API {api_key}) in a "
                "version this client speaks; is its listener SASL_PLAINTEXT or SASL_SSL? "
                "(else set security.protocol to PLAINTEXT or SSL in the client config)"
            )
        return min(ours[1], theirs[1])

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism's exchange is over."""
        login = security.sasl_client()
        handshake = self._sasl_version(SASL_HANDSHAKE_KEY)
        authenticate = self._sasl_version(SASL_AUTHENTICATE_KEY)
        response = await self._kafka(
            build(request_class(SASL_HANDSHAKE_KEY, handshake), mechanism=login.mechanism_name)
        )
        code = int(response.error_code)
        if code == _UNSUPPORTED_SASL_MECHANISM:
            enabled = ", ".join(_printable(str(m)) for m in response.mechanisms) or "none"
            raise ClientError(
                f"the server does not enable SASL mechanism {login.mechanism_name} (it enables: "
                f"{enabled}); set sasl.mechanism in the client config to one of them"
            )
        if code == _ILLEGAL_SASL_STATE:
            raise ClientError(
                "the server refuses a SASL login on this listener (ILLEGAL_SASL_STATE, 34); is "
                "it SASL_PLAINTEXT or SASL_SSL? (else set security.protocol to PLAINTEXT or SSL "
                "in the client config)"
            )
        if code != 0:
            raise ClientError(f"SaslHandshake failed with error {code}")
        try:
            token: bytes | None = login.start()
            while token is not None:
                answer = await self._kafka(
                    build(request_class(SASL_AUTHENTICATE_KEY, authenticate), auth_bytes=token)
                )
                if int(answer.error_code) != 0:
                    message = _printable(answer.error_message or "") or "no reason given"
                    raise ClientError(
                        f"authentication failed: {message} "
                        f"(error {int(answer.error_code)}, user {login_user(security)!r})"
                    )
                # SCRAM's answer derives the salted password (PBKDF2, up to 16384 rounds):
                # off the event loop, so other connections of the same loop go on meanwhile.
                token = await asyncio.to_thread(login.respond, bytes(answer.auth_bytes or b""))
        except SaslClientError as exc:
            raise ClientError(f"authentication failed: {exc}") from None
        if not login.complete:
            raise ClientError("authentication failed: the SASL exchange did not finish")

    def version(self, api_key: int) -> int:
        """The newest version of an API both this client and the server speak."""
        ours = SUPPORTED_VERSIONS.get(api_key) or PRIVATE_VERSIONS.get(api_key)
        theirs = self._versions.get(api_key)
        if ours is None or theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise ClientError(
                f"the server does not answer API {codec.API_NAMES.get(api_key, api_key)} in a "
                "version this client speaks; is it `mlog serve` of a matching release?"
            )
        return min(ours[1], theirs[1])

    async def _send(
        self,
        frame: bytes,
        correlation_id: int,
        decode: Callable[[bytes], Any],
        timeout_ms: int | None = None,
    ) -> Any:
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        future = self.send_frame(frame, correlation_id, decode)
        try:
            await self._writer.drain()
            async with asyncio.timeout(timeout_ms / 1000):
                return await asyncio.shield(future)
        except TimeoutError:
            raise ConnectionLost(f"no answer within {timeout_ms} ms") from None
        except ConnectionError as exc:
            raise ConnectionLost(f"the connection failed: {exc}") from None

    def send_frame(
        self, frame: bytes, correlation_id: int, decode: Callable[[bytes], Any]
    ) -> asyncio.Future[Any]:
        """Write a request frame now; the future of its decoded answer.

        Never waits: no timeout and no flow control (the caller bounds both). The future
        fails with `ClientError` if the connection does; `ConnectionLost` at once if closed.
        """
        if self._closed:
            raise ConnectionLost("the connection is closed")
        if self._receiver.done():
            # Reading ended (the server closed the connection after its last answer): nothing
            # would answer or fail this request, so it would wait out its whole timeout.
            raise ConnectionLost(self._ended)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # Its waiter may be gone (a timeout, an interrupt) when the answer or a failure comes:
        # mark the outcome seen, so asyncio does not report it as never retrieved.
        future.add_done_callback(_seen)
        api_key = _API_KEY.unpack_from(frame, _SIZE.size)[0] if len(frame) >= 6 else -1
        self._pending.append(_Pending(api_key, correlation_id, decode, future))
        self._writer.write(frame)
        return future

    def _take_over(self, other: ClientConnection) -> None:
        """Use `other`'s connection from now on (this one is closed): a reconnect."""
        self._reader, self._writer, self._receiver = other._reader, other._writer, other._receiver
        self._pending, self._versions, self._ids = other._pending, other._versions, other._ids
        self.address, self._secured, self._closed = other.address, other._secured, False
        self._ended, self._answered = other._ended, other._answered
        other._closed = True  # its streams and receiver are this one's now

    async def send_entity(self, body: Any, *, timeout_ms: int | None = None) -> Any:
        """Send a kio request entity in the version it is (the caller checked the server's).

        Its kio response entity; `ConnectionLost` without one within `timeout_ms` (default:
        the connection's). Used for APIs outside `SUPPORTED_VERSIONS` (a controller's
        Envelope to the leader, `api.server.forwarding`).
        """
        return await self._kafka(body, timeout_ms=timeout_ms)

    def speaks(self, api_key: int, version: int) -> bool:
        """Whether the server advertised `version` of API `api_key` (ApiVersions)."""
        theirs = self._versions.get(api_key)
        return theirs is not None and theirs[0] <= version <= theirs[1]

    async def _kafka(
        self, body: Any, write_id: bytes | None = None, timeout_ms: int | None = None
    ) -> Any:
        """Send a kio request entity; its kio response entity."""
        correlation_id = next(self._ids)
        api_key, version = int(body.__api_key__), int(body.__version__)
        try:
            frame = codec.encode_request(
                body, correlation_id=correlation_id, client_id=self.client_id, write_id=write_id
            )
        except (struct.error, OverflowError) as exc:
            # A value the wire cannot carry; the checks of AdminClient name the field first.
            name = codec.API_NAMES.get(api_key, api_key)
            raise ClientError(f"a value of this {name} request cannot be sent: {exc}") from None

        def decode(data: bytes) -> Any:
            _, response = codec.decode_response(api_key, version, data)
            return response

        return await self._send(frame, correlation_id, decode, timeout_ms)

    async def request(self, api_key: int, **values: Any) -> Any:
        """Any Kafka API this server answers, at the newest common version (kio entities)."""
        return await self._kafka(build(request_class(api_key, self.version(api_key)), **values))

    async def call(
        self,
        api: PrivateApi,
        request: Any,
        *,
        timeout_ms: int | None = None,
        write_id: bytes | None = None,
    ) -> Any:
        """One of our own APIs; raises `RemoteError` when the server refuses it.

        `write_id` (`codec.write_id_bytes`) makes a write idempotent; only a flexible version
        carries one (`ClientError` if the server speaks none: see `AdminClient.call_write`).
        """
        version = self.version(api.key)
        correlation_id = next(self._ids)
        try:
            frame = private.encode_request(
                api,
                request,
                correlation_id=correlation_id,
                client_id=self.client_id,
                version=version,
                write_id=write_id,
            )
        except private.OlderVersionError as exc:
            raise ClientError(str(exc)) from None
        except (struct.error, OverflowError) as exc:
            raise ClientError(f"a value of this {api.name} request cannot be sent: {exc}") from None
        _, status, body = await self._send(
            frame,
            correlation_id,
            lambda data: private.decode_response(api, data, version),
            max(self.timeout_ms, timeout_ms or 0),
        )
        if status.error_code != 0:
            raise RemoteError(status.error_code, status.error_message or api.name + " failed")
        return body

    async def _receive(self) -> None:
        try:
            while True:
                size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                data = await self._reader.readexactly(size)
                if not self._pending:
                    raise ConnectionLost("the server sent an answer to no request")
                pending = self._pending.popleft()
                # ApiVersions and the SASL APIs are answered by a SASL listener before any
                # login: only an answer to another request shows the server took this client.
                self._answered = self._answered or pending.api_key not in _BEFORE_LOGIN
                (correlation_id,) = _SIZE.unpack_from(data, 0)
                if correlation_id != pending.correlation_id:
                    raise ConnectionLost(
                        f"answer for request {correlation_id}, expected {pending.correlation_id}"
                    )
                if pending.future.done():
                    continue
                try:
                    pending.future.set_result(pending.decode(data))
                except (ProtocolError, MetadataLogError, ValueError, KeyError) as exc:
                    pending.future.set_exception(ClientError(f"unreadable answer: {exc}"))
        except asyncio.IncompleteReadError:
            self._fail_pending(ConnectionLost(self._closed_by_server()))
        except (ConnectionError, OSError) as exc:
            self._fail_pending(ConnectionLost(f"the connection failed: {exc}"))
        except ClientError as exc:
            self._fail_pending(exc)

    def _closed_by_server(self) -> str:
        """Why reading ended when the server closed the connection, and what it means.

        Before it answered anything but ApiVersions or a login, a server that closes is often a
        listener that wants TLS or a login from a client that sent neither. After, it is not:
        the server went away (stopped, killed, a leader handing over) or dropped this client.
        """
        where = f"the server at {self.address}" if self.address else "the server"
        if not self._answered:
            hint = (
                ""
                if self._secured
                else " (if its listener needs TLS or a login, give the client config with "
                "--command-config)"
            )
            return f"{where} closed the connection{hint}"
        return (
            f"{where} closed the connection (it stopped or dropped this client); the requests "
            "in flight got no answer: connect again, to another server if it is gone"
        )

    def _fail_pending(self, exc: Exception) -> None:
        self._ended = str(exc)
        while self._pending:
            pending = self._pending.popleft()
            if not pending.future.done():
                pending.future.set_exception(exc)
