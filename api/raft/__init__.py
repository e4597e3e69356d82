"""The controller quorum (KRaft, KIP-595): the sans-IO core, its shell and its transport.

`api.raft.core` decides (a pure state machine, etcd raft's model); the shell (`api.raft.node`
and the modules beside it) carries out what the core asks over the log and the service's
public API; `api.raft.transport` moves the messages (wire codec, peer links, endpoint).
Imports run one way: transport and shell use the core, the core uses neither.
"""
