"""The user directory."""
