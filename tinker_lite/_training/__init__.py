"""The training client's parts: its ordered submit queue, creation, argument and batch checks,
and the custom loss."""
