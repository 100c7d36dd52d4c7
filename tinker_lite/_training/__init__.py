"""The training client's parts: submit queue, creation, argument and batch checks, custom loss."""
