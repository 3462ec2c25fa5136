"""Rule families: a module per family of identities (see each module's docstring)."""
