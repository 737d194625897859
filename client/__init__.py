"""coord's client library."""
