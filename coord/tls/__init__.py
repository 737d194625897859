"""TLS for coord's two ports and its clients.

`certs` makes a CA and the certificates it signs (`coord certs`, the test rigs); it is
the only module here built on `cryptography`, so members and clients, which only read
PEM files, never load it. `files` reads what the flags name (PEM files, a private file's
permissions, cipher names); `credentials` turns them into what each end needs: gRPC
server and channel credentials, `ssl.SSLContext`s for the peer port, and the verified
client certificate's common name on the request path; `grpc_ciphers` sets gRPC's
process-wide cipher suites before gRPC loads.

Nothing here imports the server, the client library or the tools: all of them build on
it.
"""
