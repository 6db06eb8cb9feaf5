"""The admin pages: run history, jobs (timeline, Run now, runtime control), dynamic jobs.

Django's admin autodiscovery imports this package; [`pages`][anarchon_django.admin.pages]
registers the pages with the admin site.
"""

from anarchon_django.admin import pages as pages
