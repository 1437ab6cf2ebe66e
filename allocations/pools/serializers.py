"""Input and output serializers of the pools API (allocations/pools/api.py, docs/api.md). They
read types; a pool's rules are ``allocations/pools/services.py``'s, as for the staff page."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounting.models import Cluster
from allocations.pools.services import POOL_SETTINGS
from kit.api import ApiModelSerializer, SlugField, slug_of
from projects.models import ResourcePool

# Declared plainly: the model's blank-or-pattern field is two overlapping schemas in OpenAPI
# (a blank suffix matches both), and the rule is pool_create's anyway.
_SUFFIX_HELP = "the pool's Slurm account is the project code and this suffix (blank: the code)"


class PoolOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    partitions = slug_of("name", many=True)
    slurm_account_suffix = serializers.CharField(read_only=True, help_text=_SUFFIX_HELP)

    class Meta:
        model = ResourcePool
        fields = ["id", "cluster", "partitions", *POOL_SETTINGS]


class PoolInputSerializer(serializers.ModelSerializer):
    """A pool's settings with the model's types; ``partitions`` by name on the pool's cluster.
    No uniqueness check here: a name taken is ``pool_create``'s rule, in its words."""

    cluster = SlugField(slug_field="name", queryset=Cluster.objects.all())
    partitions = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=200,
        help_text="names of the partitions whose jobs the pool pays for",
    )  # fmt: skip
    slurm_account_suffix = serializers.CharField(
        required=False, allow_blank=True, max_length=16, help_text=_SUFFIX_HELP
    )

    class Meta:
        model = ResourcePool
        fields = ["cluster", "partitions", *POOL_SETTINGS]
        extra_kwargs: dict[str, Any] = {
            "name": {"validators": []},
            "description": {"max_length": 50_000},  # as a request's justification
        }
