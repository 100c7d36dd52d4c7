"""The real client end to end over loopback: reliability, closing, fan-out, examples, leaks."""
