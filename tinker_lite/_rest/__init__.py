"""What the REST-only clients (RestClient, AdminClient) share: their connection and base."""
