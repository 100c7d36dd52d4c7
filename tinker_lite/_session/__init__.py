"""The connection below the requestor: settings, credentials, start-up, heartbeat, sample gate."""
