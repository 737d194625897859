"""`coord tui`: a live, k9s-style operator's console for a coord cluster (textual).

It reaches the cluster only through `coord.client` (`AsyncClient`, `AsyncAdmin`) and
stays live through watch streams, never by polling each second."""
