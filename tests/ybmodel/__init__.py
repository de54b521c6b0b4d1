"""A model of YugabyteDB logical replication (tablets, Virtual WAL, slots, yboutput frames)."""
