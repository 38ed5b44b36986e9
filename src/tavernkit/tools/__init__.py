"""tavernkit.tools."""
