"""Schedulers from settings and runtime control: calls, direct queries, CLI args."""
