"""themes."""
