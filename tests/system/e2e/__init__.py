"""End-to-end tests: the examples and the example project, run as real processes."""
