"""Services: the things evals call (OpenAI-compatible endpoints, agent CLIs)."""
