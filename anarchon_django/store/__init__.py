"""The ``"django"`` backend: a lease store written on the Django ORM."""
