"""Who is calling: identities resolved from API keys, JWTs or a trusted gateway's signed headers."""
