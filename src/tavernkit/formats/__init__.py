"""tavernkit.formats."""
