/* librdkafka's admin API against `mlog serve`: CreateTopics, DescribeConfigs on a broker and
 * DeleteTopics, each bounded by a 15 s timeout. Prints one line per result ("create NAME ok",
 * "config broker ID KEY=VALUE", ...) and exits 1 at the first failure, naming it on stderr.
 * Built against Debian 12's librdkafka-dev (2.0.2), which sent controller-bound calls nowhere
 * when every node id was advertised at one address. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 15000

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "rdkafka_admin: %s: %s\n", what, detail);
    exit(1);
}

/* Waits for the one event of an admin call; fails on a timeout or a request-level error. */
static rd_kafka_event_t *wait_result(rd_kafka_queue_t *queue, const char *what) {
    rd_kafka_event_t *event = rd_kafka_queue_poll(queue, TIMEOUT_MS + 5000);
    if (event == NULL)
        fail(what, "no result");
    if (rd_kafka_event_error(event))
        fail(what, rd_kafka_event_error_string(event));
    return event;
}

static rd_kafka_AdminOptions_t *options(rd_kafka_t *rk, rd_kafka_admin_op_t op) {
    char errstr[256];
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, op);
    if (rd_kafka_AdminOptions_set_request_timeout(opts, TIMEOUT_MS, errstr, sizeof errstr))
        fail("options", errstr);
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS)
        if (rd_kafka_AdminOptions_set_operation_timeout(opts, TIMEOUT_MS, errstr, sizeof errstr))
            fail("options", errstr);
    return opts;
}

static void check_topics(const rd_kafka_topic_result_t **results, size_t count, const char *verb) {
    for (size_t i = 0; i < count; i++) {
        const char *name = rd_kafka_topic_result_name(results[i]);
        if (rd_kafka_topic_result_error(results[i]))
            fail(verb, rd_kafka_topic_result_error_string(results[i]));
        printf("%s %s ok\n", verb, name);
    }
}

int main(int argc, char **argv) {
    char errstr[512];
    if (argc != 4)
        fail("usage", "rdkafka_admin BOOTSTRAP TOPIC BROKER_ID");
    const char *topic = argv[2];
    const char *broker = argv[3];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr))
        fail("config", errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL)
        fail("client", errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    printf("librdkafka %s\n", rd_kafka_version_str());

    rd_kafka_NewTopic_t *new_topic = rd_kafka_NewTopic_new(topic, 3, 2, errstr, sizeof errstr);
    if (new_topic == NULL)
        fail("new topic", errstr);
    rd_kafka_AdminOptions_t *opts = options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_CreateTopics(rk, &new_topic, 1, opts, queue);
    rd_kafka_event_t *event = wait_result(queue, "CreateTopics");
    size_t count;
    const rd_kafka_topic_result_t **created =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &count);
    check_topics(created, count, "create");
    rd_kafka_event_destroy(event);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_NewTopic_destroy(new_topic);

    rd_kafka_ConfigResource_t *resource = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, broker);
    opts = options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_DescribeConfigs(rk, &resource, 1, opts, queue);
    event = wait_result(queue, "DescribeConfigs");
    const rd_kafka_ConfigResource_t **described = rd_kafka_DescribeConfigs_result_resources(
        rd_kafka_event_DescribeConfigs_result(event), &count);
    for (size_t i = 0; i < count; i++) {
        if (rd_kafka_ConfigResource_error(described[i]))
            fail("DescribeConfigs", rd_kafka_ConfigResource_error_string(described[i]));
        size_t entries;
        const rd_kafka_ConfigEntry_t **configs = rd_kafka_ConfigResource_configs(described[i], &entries);
        for (size_t j = 0; j < entries; j++) {
            const char *value = rd_kafka_ConfigEntry_value(configs[j]);
            printf("config broker %s %s=%s\n", rd_kafka_ConfigResource_name(described[i]),
                   rd_kafka_ConfigEntry_name(configs[j]), value ? value : "(null)");
        }
    }
    rd_kafka_event_destroy(event);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_ConfigResource_destroy(resource);

    rd_kafka_DeleteTopic_t *deleted_topic = rd_kafka_DeleteTopic_new(topic);
    opts = options(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
    rd_kafka_DeleteTopics(rk, &deleted_topic, 1, opts, queue);
    event = wait_result(queue, "DeleteTopics");
    const rd_kafka_topic_result_t **deleted =
        rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(event), &count);
    check_topics(deleted, count, "delete");
    rd_kafka_event_destroy(event);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_DeleteTopic_destroy(deleted_topic);

    rd_kafka_queue_destroy(queue);
    rd_kafka_destroy(rk);
    return 0;
}
