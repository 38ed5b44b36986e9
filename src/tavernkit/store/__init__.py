"""tavernkit.store."""
