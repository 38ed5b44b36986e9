"""tavernkit.plugins."""
