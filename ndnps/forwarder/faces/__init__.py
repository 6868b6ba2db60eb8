"""asyncio faces: thin adapters between sockets and the sans-I/O forwarder core."""
