"""tavernkit.text."""
