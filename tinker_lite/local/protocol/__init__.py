"""The wire formats of the local server: request codecs and strict request validation."""
