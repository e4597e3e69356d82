"""Replay: the metadata image built from the log, snapshots and time travel."""
