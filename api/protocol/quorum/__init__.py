"""The controller quorum's KRaft APIs on Kafka's wire: its messages <-> KRaft frames (sans-IO).

The consensus core (`api.raft.core`) speaks in the dataclasses of `messages.py`; controllers
speak Kafka's KRaft APIs to each other, through kio's schemas and `codec`'s framing and header.
This package maps one onto the other, both ways (`requests.py` the requests, `responses.py` the
answers, `apis.py` the keys, versions and the messages only the wire carries), for the one
partition there is: Kafka's `__cluster_metadata` partition 0 (topic id `AAAAAAAAAAAAAAAAAAAAAQ`,
Kafka's `Uuid.METADATA_TOPIC_ID`).

Versions (`QUORUM_VERSIONS`), those of Kafka 4.0's KRaft (KIP-853 and KIP-996), all flexible:
Vote v2 (its `PreVote` field carries the core's `pre_vote`), BeginQuorumEpoch v1, EndQuorumEpoch
v1, Fetch v17 (the replica in `ReplicaState`, the topic by id), FetchSnapshot v1 and
DescribeQuorum v0-v2 (v2 sent; older ones served to older tools, v2 with each voter's directory
id). The other KIP-853 directory ids and endpoints (Vote, BeginQuorumEpoch, Fetch) are sent
empty.

`FetchResponse.records` holds the core's entries in our own framing (`entries.py`), not Kafka
record batches: the payloads are opaque to this layer, and a frame that is truncated, damaged or
claims more than it holds is refused with one line (`RaftWireError`).

Error codes are mapped both ways (`errors.py`: `wire_error_code`, `core_error_code`): Kafka's,
except the core's INCONSISTENT_VOTER_SET, which is 94 on the wire. An answer with a code the
core does not know (say, CLUSTER_AUTHORIZATION_FAILED at the top level) is a `RaftWireRefusal`
carrying it: the caller logs it and drops the answer, as Raft drops a lost message.

Requests carry the core's `correlation_id` in their header, and answers echo it there.

Every number of a request is checked at this door (`request_out_of_range`, after `bounds.py`):
an epoch past the last one an election can reach (2^31 - 2), a negative offset, id, position or
count is refused with INVALID_REQUEST before the core or the endpoint sees it; an answer with
one is dropped as a lost one.

KIP-853's AddRaftVoter (80, v0-1), RemoveRaftVoter (81) and UpdateRaftVoter (82) are an
operator's and a voter's requests, answered by the server's endpoint rather than the core: their
answers carry the outcome at the top level (`VOTER_CHANGE_KEYS`), and directory ids are Kafka's
Uuid text (`directory_uuid`, `directory_text`).

`messages.py` and `bounds.py` import nothing of `api`, so the core steps them without loading a
codec. `api.raft` (the quorum) and `api.client` (the admin's DescribeQuorum and voter changes)
both speak through this package.
"""
