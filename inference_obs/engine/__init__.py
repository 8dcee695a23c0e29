"""LOCAL evaluation with Prometheus's numeric semantics: pure functions on arrays."""
