"""tavernkit."""
