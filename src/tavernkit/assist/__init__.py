"""Assistant features built on the plugin context's ``generate_task``: what an application
offers its user besides the chat itself (today :mod:`.card_edit`, the character-editor
assistant behind ``tavernkit card edit``)."""
