"""The ``ANARCHON`` setting, its checks, the store it builds, declared jobs."""
