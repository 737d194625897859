"""coord.server: the member process (transport, codec, services)."""
