"""The HTTP server (``tavernkit serve``): FastAPI routes over the Tavern's services."""
