//! xwarpd internals: configuration, lifecycle, counters and the Prometheus endpoint.
