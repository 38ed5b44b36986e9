"""tavernkit.models."""
