"""An estimate line of a request for SU (an application's, a project request's): ``jobs`` times
what one job of that shape costs on a partition, priced by the quote engine. One rule for both
kinds of request; each stores the line in its own table."""

from __future__ import annotations

from typing import Any

from accounting.clusters.quotes import QuoteRequest
from accounting.clusters.selectors import quote_get
from accounting.models import Partition
from allocations.grants.services import check_rule


def estimate_line_priced(*, partition: Partition, jobs: int, quote: QuoteRequest) -> dict[str, Any]:
    """The fields of an estimate line (``RequestEstimate``, ``ProjectRequestEstimate``): the
    job's shape and ``jobs`` x its quoted SU; at least one job."""
    check_rule(jobs >= 1, "an estimate line covers at least one job")
    _, charge = quote_get(partition=partition, request=quote)
    return {
        "partition": partition, "jobs": jobs, "nodes": quote.nodes, "hours": quote.hours,
        "cores_per_node": quote.cores_per_node, "gpus_per_node": quote.gpus_per_node,
        "memory_per_node_mb": quote.memory_per_node_mb,
        "service_units": charge.service_units * jobs,
    }  # fmt: skip
