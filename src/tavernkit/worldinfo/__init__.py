"""tavernkit.worldinfo."""
