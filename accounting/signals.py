"""What the ledger tells the apps above it, without knowing them.

``charges_booked`` is sent (with ``cluster_id``) when an import run that charged jobs ended:
balances moved. ``allocations`` sets Slurm's limits again where its pools ask for it
(docs/slurm.md). Receivers are connected in the apps' ``ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

charges_booked = Signal()
