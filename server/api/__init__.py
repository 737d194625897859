"""coord's native gRPC API (coord.v1): the services, their conversions and errors, and Admin."""
