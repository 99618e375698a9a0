"""The asyncio controller runtime: the Python counterpart of client-go and controller-runtime."""
