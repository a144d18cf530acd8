"""Contract suites run against this project's own implementations (see ctxledger.testing)."""
