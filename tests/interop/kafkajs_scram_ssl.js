// kafkajs 2.2.4 logging in with SCRAM over TLS (SASL_SSL) to `mlog serve`, then an admin call.
// Arguments: address, CA file, mechanism (scram-sha-256 | scram-sha-512), user, password.
// Prints one JSON line of what it saw; exits 1 with the error on stderr when a call fails.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

async function run(address, caFile, mechanism, username, password, topic) {
  const kafka = new Kafka({
    clientId: 'mlog-interop-scram',
    brokers: [address],
    logLevel: logLevel.NOTHING,
    retry: { retries: 1, initialRetryTime: 100 },
    requestTimeout: 10000,
    ssl: { ca: [fs.readFileSync(caFile, 'utf-8')] },
    sasl: { mechanism, username, password },
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor: 1 }],
      waitForLeaders: false,
    })
    const topics = await admin.listTopics()
    process.stdout.write(JSON.stringify({ created, listed: topics.includes(topic) }) + '\n')
  } finally {
    await admin.disconnect()
  }
}

run(...process.argv.slice(2)).catch(error => {
  process.stderr.write(`${error.name}: ${error.message}\n`)
  process.exit(1)
})
