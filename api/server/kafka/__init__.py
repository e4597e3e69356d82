"""The Kafka admin APIs this server answers, one module per concern; `dispatch` maps keys to them.

`metadata` (ApiVersions, Metadata, DescribeCluster, DescribeTopicPartitions and the node
list), `topics` (CreateTopics, DeleteTopics, CreatePartitions), `configs` (DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs), `partitions` (ElectLeaders and reassignments), `acls`
(DescribeAcls); `base` holds what they share (the listener, the session, the answer).
"""
