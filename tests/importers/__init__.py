"""One test module per importer (and the exporters, detection and malformed input)."""
