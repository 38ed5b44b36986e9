"""tavernkit.prompt."""
