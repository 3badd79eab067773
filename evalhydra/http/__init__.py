"""HTTP transports under httpx's API: what the OpenAI-compatible service sends requests through."""
