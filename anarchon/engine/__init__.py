"""The engine: what one instance does with its jobs.

Planning slots, claiming them, running the winners under a heartbeated lease, recording
outcomes, taking over from dead runners and the thread-backed sync facade. Internal: the
public classes are ``anarchon.AsyncScheduler`` and ``anarchon.Scheduler``.
"""
