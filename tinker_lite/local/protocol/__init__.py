"""The wire formats of the local server: request codecs, request validation, JSON views."""
