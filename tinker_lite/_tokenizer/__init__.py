"""The light tokenizer (``tokenizer.json`` without transformers) and its chat templates."""
