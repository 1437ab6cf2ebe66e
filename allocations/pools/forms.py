"""The resource pool form: the input's types from the model's fields; the pool's rules (name
taken, thresholds, commands, partitions of one pool) are ``allocations/pools/services.py``'s."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.models import fields_for_model

from accounting.models import Cluster, Partition
from allocations.pools.services import POOL_SETTINGS
from projects.models import ResourcePool


class PoolForm(forms.Form):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    partitions = forms.ModelMultipleChoiceField(
        queryset=Partition.objects.select_related("cluster"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="jobs in these partitions are charged to the pool; a partition charges one "
        "pool, of its own cluster",
    )

    def __init__(self, *args: Any, pool: ResourcePool | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(fields_for_model(ResourcePool, fields=POOL_SETTINGS))
        if pool is not None:  # the cluster stays: the pool's grants and jobs are there
            del self.fields["cluster"]
            partitions = self.fields["partitions"]
            assert isinstance(partitions, forms.ModelMultipleChoiceField)
            partitions.queryset = Partition.objects.filter(cluster=pool.cluster_id)

    def settings(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in POOL_SETTINGS}
