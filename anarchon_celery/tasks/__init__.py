"""The task side: publishing a won slot, outcomes, manual runs, the worker hook."""
