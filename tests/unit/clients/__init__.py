"""Unit tests of the public clients (and their journal, progress, tokenizer) on scripted servers."""
