"""tavernkit.chat."""
