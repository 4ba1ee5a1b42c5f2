"""Context engine (SPEC §5; issue 5)."""
