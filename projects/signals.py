"""What projects tell the apps above them, without knowing them.

``projects_created`` is sent (with ``codes``, a list) when projects were created: jobs
quarantined for an unknown account may now have a project, and the ledger (``accounting``)
retries them once the transaction commits. The apps connect their receivers in their ``ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

projects_created = Signal()
