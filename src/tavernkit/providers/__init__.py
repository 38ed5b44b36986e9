"""tavernkit.providers."""
