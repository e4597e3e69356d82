"""Attacks of issue #31 on logins: finding 4 (PLAIN guesses) and finding 7's login parts.

Before the fix every PLAIN guess cost a key derivation on the thread pool that logins, FetchLog
and ImageAt share, each failure was a WARNING line without the user name, SCRAM answered an
unknown user `i=4096` whatever real users had, PLAIN was on by default on SASL_PLAINTEXT without
a word, and `ANONYMOUS` and `*` could be given credentials.

A real server on 127.0.0.1 in this process; guessers come from 127.0.0.2 (another address of
the loopback). Costs are compared as ratios of CPU time to one derivation measured here; the
only latency bound is the issue's own figure (the admin's login took 4.2 s under attack).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from pathlib import Path

import pytest

from api.security.scram_messages import b64decode
from api.server.config import server_config
from api.server.server import ServerListener
from tests.support.attacks import ADMIN, ADMIN_PASSWORD, WAIT, Wire, seed_user
from tests.support.server_thread import running_server

ITERATIONS = 16384
"""The admin's iteration count: a derivation dear enough to measure."""

SASL = ServerListener(
    name="SASL_PLAINTEXT",
    security_protocol="SASL_PLAINTEXT",
    host="127.0.0.1",
    port=0,
    sasl_mechanisms=("SCRAM-SHA-256", "PLAIN"),
)
PLAIN_TEXT = ServerListener(
    name="PLAINTEXT", security_protocol="PLAINTEXT", host="127.0.0.1", port=0
)
GUESSER = "127.0.0.2"


def _guess(server: object, user: str, password: str) -> int:
    wire = Wire(server, "SASL_PLAINTEXT", source=GUESSER)  # type: ignore[arg-type]
    try:
        return wire.plain_login(user, password)
    finally:
        wire.close()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    seed_user(folder, ADMIN, ADMIN_PASSWORD, iterations=ITERATIONS)
    return folder


def test_repeated_plain_guesses_cost_no_derivation_and_flood_no_log(
    log_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server")
    derive = hashlib.pbkdf2_hmac
    derivations = [0]

    def counted(*args: object, **kwargs: object) -> bytes:
        if threading.current_thread() is not threading.main_thread():  # the server's
            derivations[0] += 1
        return derive(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)
    guesses = 40
    with running_server(
        log_dir, brokers=1, listeners=[SASL], failed_authentication_delay_ms=1
    ) as server:
        assert _guess(server, ADMIN, "wrong") == 58  # the first guesses derive once each
        assert _guess(server, "mallory", "wrong") == 58
        first = derivations[0]
        for _ in range(guesses):
            assert _guess(server, ADMIN, "wrong") == 58
            assert _guess(server, "mallory", "wrong") == 58
        repeated = derivations[0] - first
    # Before: one derivation per guess (2 x 40 of them). Now: none.
    assert first >= 1 and repeated == 0, (first, repeated)
    lines = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    assert 1 <= len(lines) <= 3, lines  # the first at once, the rest summed up at the end
    assert "user 'admin'" in lines[0]
    assert any("user 'mallory' from 127.0.0.2" in line for line in lines[1:])
    assert "wrong" not in caplog.text.replace("Authentication failed", "")


def test_the_admin_logs_in_while_anonymous_guessers_flood_plain(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guesses derive on a bounded pool of their own, never the one FetchLog and ImageAt use."""
    stop = threading.Event()
    refused = [0]
    derive = hashlib.pbkdf2_hmac
    lock = threading.Lock()
    running = [0, 0]  # under way, most at once
    threads_used: set[str] = set()

    def counted(*args: object, **kwargs: object) -> bytes:
        if threading.current_thread() is threading.main_thread():  # the admin's own client
            return derive(*args, **kwargs)  # type: ignore[arg-type]
        with lock:
            running[0] += 1
            running[1] = max(running)
            threads_used.add(threading.current_thread().name)
        try:
            return derive(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)

    def guesser(index: int) -> None:
        count = 0
        while not stop.is_set() and count < 400:
            count += 1
            try:
                _guess(server, f"user{index}-{count}", f"pw{count}")  # a new derivation each
                refused[0] += 1
            except OSError:
                pass

    with running_server(
        log_dir, brokers=1, listeners=[SASL], failed_authentication_delay_ms=1
    ) as server:
        threads = [threading.Thread(target=guesser, args=(i,), daemon=True) for i in range(16)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.5)  # the flood is under way
            logins = []
            for _ in range(10):
                start = time.perf_counter()
                admin = Wire(server, "SASL_PLAINTEXT")
                try:
                    assert admin.scram_login(ADMIN, ADMIN_PASSWORD) == 0
                    assert admin.metadata().brokers
                finally:
                    admin.close()
                logins.append(time.perf_counter() - start)
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
    worst = max(logins)
    print(f"\nadmin SCRAM logins under {refused[0]} PLAIN guesses: worst {worst * 1000:.0f} ms")
    assert refused[0] > 0
    assert threads_used and all(name.startswith("mlog-login") for name in threads_used)
    assert running[1] <= 2  # one address: at most LOGINS_PER_IP derivations at once
    # Served beside the flood, not behind it (the issue saw 4.2 s); how long it takes is
    # bench/auth_bench.py --flood's figure, not a bound a loaded host could break here.
    assert worst < WAIT, f"the admin's login took {worst:.2f} s"


def test_an_unknown_user_is_told_the_iteration_count_and_a_stable_salt_like_a_real_one(
    log_dir: Path,
) -> None:
    with running_server(log_dir, brokers=1, listeners=[SASL]) as server:
        answers = []
        for user in (ADMIN, "nobody", "nobody"):
            wire = Wire(server, "SASL_PLAINTEXT")
            try:
                _, server_first = wire.scram_first(user, "x")
            finally:
                wire.close()
            fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
            answers.append((int(fields["i"]), b64decode(fields["s"])))
    (real_i, real_salt), (fake_i, fake_salt), (again_i, again_salt) = answers
    assert real_i == fake_i == again_i == ITERATIONS
    assert fake_salt == again_salt and len(fake_salt) == len(real_salt)


def test_plain_is_off_unless_configured_and_a_warning_says_when_it_runs_in_clear(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = server_config(
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "node.id": "1", "log.dirs": "/tmp/x"}
    )
    assert "PLAIN" not in config.listeners[0].sasl_mechanisms
    caplog.set_level(logging.WARNING, logger="api.server")
    with running_server(log_dir, brokers=1, listeners=[SASL]):
        pass
    assert re.search(r"listener SASL_PLAINTEXT serves SASL PLAIN without TLS", caplog.text)


@pytest.mark.parametrize("name", ["ANONYMOUS", "*"])
def test_reserved_principal_names_get_no_credential(tmp_path: Path, name: str) -> None:
    with running_server(tmp_path / "log", brokers=1, listeners=[PLAIN_TEXT]) as server:
        wire = Wire(server, "PLAINTEXT")
        try:
            answer = wire.ask(
                51,
                0,
                deletions=[],
                upsertions=[
                    {
                        "name": name,
                        "mechanism": 1,
                        "iterations": 8192,
                        "salt": bytes(32),
                        "salted_password": bytes(32),
                    }
                ],
            )
        finally:
            wire.close()
        assert [r.error_code for r in answer.results] == [93]  # UNACCEPTABLE_CREDENTIAL
        assert server.service.image.scram.users() == []
