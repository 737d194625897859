"""What a member tells Prometheus and load balancers (`--listen-metrics-urls`): `/metrics`
in the Prometheus text format, etcd's `/health`, `/livez` and `/readyz`. Everything here
reads the member's state when it is asked; the request path only feeds a few cheap tallies
through hooks its parts already offer, and only while metrics are on."""
