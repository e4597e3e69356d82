#!/usr/bin/env bash
# End-to-end demo on the embedded defaults (run by `make demo`): a metadata service on a fresh
# data directory driven from the command line, then the log underneath it: dump, verify, and
# recovery from a write cut short by a crash, snapshots and time travel, the server with the
# CLI running through it, and audit queries in a local Spark.
set -euo pipefail

DATA_DIR="${MLOG_DEMO_DIR:-./mlog-data/demo}"
rm -rf "$DATA_DIR"
export MLOG_DATA_DIR="$DATA_DIR"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Register four brokers in two racks"
mlog brokers register --id 1 --rack rack-a --endpoint 127.0.0.1:9093
mlog brokers register --id 2 --rack rack-b --endpoint 127.0.0.1:9094
mlog brokers register --id 3 --rack rack-a --endpoint 127.0.0.1:9095
mlog brokers register --id 4 --rack rack-b --endpoint 127.0.0.1:9096
mlog brokers list

step "Create topics: placed rack-aware as Kafka does (each partition spans both racks)"
mlog topics create --topic orders --partitions 4 --replication-factor 2 --config retention.ms=86400000
mlog topics create --topic payments --replica-assignment 1:2,3:4
mlog topics create --topic bad/name || echo "(refused with Kafka's error code; nothing was written)"
mlog topics describe

step "Delete 'orders' and create it again: the new incarnation gets a new topic id"
mlog topics delete --topic orders
mlog topics create --topic orders --partitions 2 --replication-factor 2
mlog topics list

step "Add partitions to 'payments' (placed as Kafka places added partitions)"
mlog topics add-partitions --topic payments --partitions 4
mlog topics describe --topic payments

step "Configs: a cluster default (log.retention.hours) and a topic override, with their sources"
mlog configs alter --cluster --set log.retention.hours=48
mlog configs alter --topic payments --set cleanup.policy=compact
mlog configs describe --topic payments
mlog configs describe --topic orders

step "Namespaces: a tree, the same topic name in two of them (two topic ids), inherited configs"
mlog namespaces create --namespace org:apache:kafka
mlog namespaces create --namespace org:eclipse
mlog topics create --topic events --namespace org:apache --partitions 2 --replication-factor 2
mlog topics create --topic events --namespace org:eclipse --partitions 2 --replication-factor 2
mlog topics create --topic events --namespace org:nowhere || echo "(refused: namespaces are never created implicitly)"
mlog namespaces list --recursive
mlog configs alter --namespace org --set retention.ms=604800000
mlog configs alter --namespace org:apache --set cleanup.policy=compact
mlog configs alter --topic events --namespace org:apache --set segment.ms=3600000
mlog configs describe --topic events --namespace org:apache

step "Move a topic to another namespace: it keeps its id; onto a taken name it is refused"
mlog topics move --topic events --from-namespace org:eclipse --to-namespace org:apache:kafka
mlog topics move --topic events --from-namespace org:apache:kafka --to-namespace org:apache || echo "(refused: org:apache:events exists)"
mlog topics list
mlog namespaces delete --namespace org || echo "(refused: org has child namespaces; --recursive deletes the subtree)"
mlog namespaces delete --namespace org:eclipse

step "Partition reduction: refused until enabled; then READ_ONLY, NONE after the purge time, then gone"
mlog topics alter --topic payments --partitions 2 --delete-partitions-delay 2000 || echo "(refused: delete.topic.partition.enable is false by default)"
mlog configs alter --cluster --set delete.topic.partition.enable=true
mlog topics alter --topic payments --partitions 2 --delete-partitions-delay 2000
mlog topics describe --topic payments
mlog topics add-partitions --topic payments --partitions 6 || echo "(refused while the deletion is pending)"
sleep 2
mlog topics purge-pending
mlog topics describe --topic payments
echo "(the next writer, here purge-pending, removes them; every writer runs this check first)"
mlog topics purge-pending
mlog topics describe --topic payments
mlog topics alter --topic events --namespace org:apache --partitions 1 --delete-partitions-delay 0

step "Fence broker 2: leaders move off it and it leaves the ISRs"
mlog brokers fence --id 2
mlog topics describe --topic payments

step "The image, as a tree (like Kafka's metadata shell)"
mlog image show /brokers/2
mlog image show /namespaces/org:apache
mlog image show /topics/byName/payments/0
mlog image show /provenance

step "The log underneath: every change above is an appended record"
mlog log dump --limit 12
mlog log segments
mlog log verify

step "Simulate a crash in the middle of the next write: a block cut short after the last one"
segment="$DATA_DIR/log/00000000000000000000.avro"
# A copy of the last block without its last 7 bytes, appended: what a write that never
# finished leaves (the file ends inside the block, past the last acknowledged entry).
python - "$segment" <<'PY'
import sys
path = sys.argv[1]
data = open(path, "rb").read()
sync = data[-16:]
start = data.rfind(sync, 0, len(data) - 16) + 16
with open(path, "ab") as f:
    f.write(data[start:-7])
PY
mlog log verify || echo "(verify exit code $?: a read-only check reports the torn tail)"

step "Readers stop at the last whole block: the acknowledged fence is there, broker 2 is fenced"
mlog brokers list

step "The next writer truncates the torn tail (with a WARNING) and continues: unfence"
mlog brokers unfence --id 2
mlog brokers list
mlog log verify

step "Any Avro tool reads the segments directly (here: fastavro)"
python -c "import fastavro,sys; r=list(fastavro.reader(open(sys.argv[1],'rb'))); print(len(r), 'entries; last:', r[-1]['record'])" "$segment"

step "Snapshots in SQL (SQLite in the data directory by default): take one, list it"
mlog snapshot create
mlog topics create --topic audit --partitions 2 --replication-factor 2
mlog snapshot create
mlog snapshot list
mlog snapshot verify

step "Time travel: the image at an earlier offset (before 'audit' existed)"
first_snapshot=$(mlog snapshot list --output json | python -c "import json,sys; print(json.load(sys.stdin)[0]['offset'])")
mlog image show --at-offset "$first_snapshot" /topics/byName

step "What changed since then, and every entry that touched 'orders' (each incarnation's id)"
mlog image diff --from "$first_snapshot"
mlog history --topic orders

step "The snapshot tables are plain SQL: partitions per mode in the newest snapshot"
python - "$DATA_DIR/snapshots.db" <<'PY'
import sqlite3, sys
with sqlite3.connect(sys.argv[1]) as db:
    for row in db.execute(
        "SELECT t.name, p.partition_id, p.mode, p.replicas FROM snapshot_partitions p "
        "JOIN snapshot_topics t USING (snapshot_id, topic_id) "
        "WHERE p.snapshot_id = (SELECT max(id) FROM snapshots) ORDER BY t.name, p.partition_id"
    ):
        print(*row)
PY

step "Serve the Kafka admin protocol; the same commands run through it with --bootstrap-server"
port=$(python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
mlog serve --listen "127.0.0.1:$port" &
server=$!
python - "$port" <<'PY'
import socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("mlog serve did not start listening within 60 s")
        time.sleep(0.2)
PY
export MLOG_BOOTSTRAP_SERVER="127.0.0.1:$port"
mlog namespaces create --namespace team:blue
mlog topics create --topic clicks --namespace team:blue --partitions 3 --replication-factor 2
mlog topics list
mlog history --namespace team:blue
mlog log dump --limit 3   # through FetchLog, as on the data directory
mlog log segments --bootstrap-server "127.0.0.1:$port" || echo "(refused: segments are files of the data directory)"
unset MLOG_BOOTSTRAP_SERVER
kill -TERM "$server"
wait "$server"

step "Audit in Spark (local): every incarnation of 'orders', and the state replayed in Spark checked against the image"
mlog audit topic-lifecycle --topic orders
last=$(mlog log segments --output json | python -c "import json,sys; print(json.load(sys.stdin)[-1]['next_offset'] - 1)")
mlog audit state --at-offset "$last" --check

step "The web console over the same history (docs/console.md): a user to sign in as, a check that it serves"
printf 'demo-password' | mlog users scram-set --name demo --mechanism SCRAM-SHA-512 --password-stdin
port=$(python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
mlog console --listen "127.0.0.1:$port" &
console=$!
python - "$port" <<'PY'
import sys, time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/login", timeout=2) as page:
            assert page.status == 200 and b"Sign in" in page.read()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("mlog console did not answer within 60 s")
        time.sleep(0.2)
PY
kill -TERM "$console"
wait "$console"
echo "Browse this history: mlog console --data-dir $DATA_DIR --listen 127.0.0.1:8080"
echo "then open http://127.0.0.1:8080/ and sign in as demo / demo-password"
