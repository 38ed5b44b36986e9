"""tavernkit.generation."""
