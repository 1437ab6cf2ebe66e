"""Input and output serializers of the pools API (allocations/pools/api.py, docs/api.md). They
read types; a pool's rules are ``allocations/pools/services.py``'s, as for the staff page."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounting.models import Cluster
from allocations.pools.services import POOL_SETTINGS
from kit.api import ApiModelSerializer, slug_of
from projects.models import ResourcePool


class PoolOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    partitions = slug_of("name", many=True)

    class Meta:
        model = ResourcePool
        fields = ["id", "cluster", "partitions", *POOL_SETTINGS]


class PoolInputSerializer(serializers.ModelSerializer):
    """A pool's settings with the model's types; ``partitions`` by name on the pool's cluster.
    No uniqueness check here: a name taken is ``pool_create``'s rule, in its words."""

    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    partitions = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=200,
        help_text="names of the partitions whose jobs the pool pays for",
    )  # fmt: skip

    class Meta:
        model = ResourcePool
        fields = ["cluster", "partitions", *POOL_SETTINGS]
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}
