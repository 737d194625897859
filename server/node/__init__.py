"""The consensus driver: `driver.Node` runs the Raft core (coord.raft) over its storage and
transport and applies committed entries to the state machine; `members` (who is in the
cluster), `snapshots` (when, and taken off the loop), `statemachine` (the contract it
applies through)."""
