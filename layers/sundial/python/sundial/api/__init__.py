"""The HTTP adapter: Powertools routers, response models and error mapping."""
