"""The wire formats of the local server: request codecs and strict parsing of request bodies."""
