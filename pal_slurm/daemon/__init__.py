"""pald: the placement daemon (socket server, protocol, state sync, deferred release)."""
