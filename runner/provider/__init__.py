"""Provider clients: one per service, plus auth, errors and pagination."""
