"""``/v1``: Navi as an OpenAI-compatible model (docs/api.md); ``api.py`` holds the routes."""
