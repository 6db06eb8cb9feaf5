"""The beat side: the scheduler, its settings and store, its background loops."""
