// kafkajs 2.2.4 against `mlog serve`: the calls an admin tool makes, with a metadata refresh
// between them (kafkajs refreshes before every createTopics). Prints one JSON line of what it saw;
// exits 1 with the error on stderr when a call fails.
'use strict'

const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')

async function run(address) {
  const kafka = new Kafka({
    clientId: 'mlog-interop',
    brokers: [address],
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 },
    requestTimeout: 10000,
  })
  const admin = kafka.admin()
  await admin.connect()
  const seen = {}
  try {
    seen.createdFirst = await admin.createTopics({
      topics: [{ topic: 'kjs-one', numPartitions: 2, replicationFactor: 2 }],
      waitForLeaders: false,
    })
    // A second create after kafkajs refreshed its metadata: the call that failed with
    // "Closed connection" when every node id shared one address with different racks.
    seen.createdSecond = await admin.createTopics({
      topics: [{ topic: 'kjs-two', numPartitions: 1, replicationFactor: 3 }],
      waitForLeaders: false,
    })
    const cluster = await admin.describeCluster()
    seen.controller = cluster.controller
    seen.brokers = cluster.brokers.map(b => ({ nodeId: b.nodeId, host: b.host, port: b.port }))
    const metadata = await admin.fetchTopicMetadata({ topics: ['kjs-one', 'kjs-two'] })
    seen.topics = metadata.topics
      .map(t => ({
        name: t.name,
        partitions: t.partitions
          .map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas }))
          .sort((a, b) => a.partition - b.partition),
      }))
      .sort((a, b) => (a.name < b.name ? -1 : 1))
    const configs = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjs-one', configNames: ['cleanup.policy'] }],
      includeSynonyms: false,
    })
    seen.cleanupPolicy = configs.resources[0].configEntries.map(c => c.configValue)
    const described = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjs-two', configNames: ['retention.ms', 'segment.ms'] }],
      includeSynonyms: true,
    })
    seen.synonyms = Object.fromEntries(
      described.resources[0].configEntries.map(c => [
        c.configName,
        c.configSynonyms.map(s => `${s.configSource}:${s.configName}=${s.configValue}`),
      ])
    )
    await admin.deleteTopics({ topics: ['kjs-one'] })
    seen.listed = (await admin.listTopics()).sort()
  } finally {
    await admin.disconnect()
  }
  return seen
}

run(process.argv[2]).then(
  seen => {
    process.stdout.write(JSON.stringify(seen) + '\n')
  },
  error => {
    process.stderr.write(`kafkajs: ${error.name}: ${error.message}\n`)
    process.exit(1)
  }
)
