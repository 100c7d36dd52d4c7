"""What the local server keeps on disk: checkpoints, the durable state, safetensors files."""
