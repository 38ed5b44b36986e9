"""The exception tree of :mod:`tavernkit.errors`, one module per family; import the classes
from ``tavernkit.errors`` (or ``tavernkit``), never from here."""
