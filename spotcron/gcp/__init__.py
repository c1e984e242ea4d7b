"""Adapters on Google's clients: the engine's ports for the functions (Compute, Storage, Pub/Sub,
identity, the broker's minter, advice), RS256 tokens, the one error mapping (`errors`) and retry
loop (`retry`). `admin/` holds deploy's clients and never ships to the functions. Google's client
libraries are imported only in here."""
