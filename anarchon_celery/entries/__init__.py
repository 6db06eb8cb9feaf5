"""Beat entries saved at run time and their dynamic jobs."""
