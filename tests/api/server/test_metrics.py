"""The server's metrics: the request counts, the gauges read from the image, the probes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from api.client import AdminClient
from api.protocol.codec import Answer
from api.server.metrics import ImageCounts, answer_error
from api.server.metrics_listener import MetricsListener
from replay.controller.commands import CreatableTopic
from replay.image import EMPTY_IMAGE
from tests.support.metrics_scrape import readyz, scrape
from tests.support.server_thread import running_server


def test_an_answer_s_error_is_its_top_level_code_else_its_first_item_s() -> None:
    assert answer_error(Answer(object, {"error_code": 0, "topics": []})) == "NONE"
    assert answer_error(Answer(object, {"error_code": 41})) == "NOT_CONTROLLER"
    items = [{"name": "a", "error_code": 0}, {"name": "b", "error_code": 36}]
    assert answer_error(Answer(object, {"topics": items})) == "TOPIC_ALREADY_EXISTS"
    assert answer_error(Answer(object, {"topics": [{"error_code": 9999}]})) == "9999"
    assert answer_error(b"private body") == "NONE"


def test_image_counts_of_an_empty_image() -> None:
    counts = ImageCounts.of(EMPTY_IMAGE)
    assert (counts.topics, counts.partitions, counts.offline_partitions) == (0, 0, 0)
    assert counts.modes == {"read_write": 0, "read_only": 0, "none": 0}


def test_the_listener_answers_paths_and_refuses_the_rest(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", metrics_listen=("127.0.0.1", 0)) as server:
        listener = server.metrics_listener
        assert listener is not None
        assert listener.answer(b"GET /healthz HTTP/1.1\r\n\r\n")[:2] == (200, "text/plain")
        status, _, body = listener.answer(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
        assert status == 200 and json.loads(body)["role"] == "standalone"
        assert listener.answer(b"GET /nothing HTTP/1.1\r\n\r\n")[0] == 404
        assert listener.answer(b"POST /metrics HTTP/1.1\r\n\r\n")[0] == 405
        assert listener.answer(b"garbage\r\n\r\n")[0] == 400


def test_requests_are_counted_per_api_and_error_and_gauges_follow_the_image(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log", metrics_listen=("127.0.0.1", 0)) as server:
        assert server.metrics_listener is not None
        address = server.metrics_listener.address

        async def work() -> None:
            client = await AdminClient.connect(server.address)
            try:
                await client.create_topics([CreatableTopic(name="a", num_partitions=3)])
                await client.create_topics([CreatableTopic(name="a")])
                await client.metadata([])
            finally:
                await client.close()

        asyncio.run(work())
        values = scrape(address)
        assert values["mlog_server_requests_total{api=CreateTopics,error=NONE}"] == 1
        assert (
            values["mlog_server_requests_total{api=CreateTopics,error=TOPIC_ALREADY_EXISTS}"] == 1
        )
        assert values["mlog_server_request_duration_seconds_count{api=CreateTopics}"] == 2
        assert values["mlog_controller_global_topic_count"] == 1
        assert values["mlog_controller_global_partition_count"] == 3
        assert values["mlog_controller_partitions_by_mode{mode=read_write}"] == 3
        assert values["mlog_controller_active_broker_count"] == 3
        offset = server.service.image.provenance.offset
        assert values["mlog_controller_last_applied_record_offset"] == offset
        assert values["mlog_controller_last_committed_record_offset"] == offset
        assert values["mlog_server_connections"] == 0
        digest = server.service.committed_digest()
        assert digest is not None and digest.offset == offset
        assert values["mlog_log_digest_offset"] == offset
        assert values["mlog_log_digest_chain_prefix"] == int(digest.chain[:6].hex(), 16)
        assert readyz(address) == (200, server.health().to_json())


def test_two_servers_in_one_process_have_their_own_registries(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "a", metrics_listen=("127.0.0.1", 0)) as one,
        running_server(tmp_path / "b", brokers=1, metrics_listen=("127.0.0.1", 0)) as two,
    ):
        assert one.metrics is not None and two.metrics is not None
        assert one.metrics.registry is not two.metrics.registry
        texts = [
            MetricsListener.answer(listener, b"GET /metrics HTTP/1.1\r\n\r\n")[2].decode()
            for listener in (one.metrics_listener, two.metrics_listener)
            if listener is not None
        ]
        brokers = []
        for text in texts:
            for family in text_string_to_metric_families(text):
                if family.name == "mlog_controller_active_broker_count":
                    brokers.append(family.samples[0].value)
        assert brokers == [3, 1]


def test_without_metrics_listen_nothing_is_counted(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        assert server.metrics is None and server.metrics_listener is None
