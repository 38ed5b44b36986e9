"""tavernkit.cli."""
