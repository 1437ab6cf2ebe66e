"""The resource pools API: everyone signed in reads pools; staff create and change them through
the services the staff pages call (``pool_create``, ``pool_update``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounting.models import Cluster, Partition
from allocations.pools.serializers import PoolInputSerializer, PoolOutputSerializer
from allocations.pools.services import POOL_SETTINGS, pool_create, pool_update
from kit.api import ID_PATTERN, ApiViewSet, IsStaffOrReadOnly, acting_user
from projects.models import ResourcePool


def _partitions(cluster: Cluster, names: list[str]) -> list[Partition]:
    found = {p.name: p for p in Partition.objects.filter(cluster=cluster, name__in=names)}
    unknown = sorted(set(names) - set(found))
    if unknown:
        raise serializers.ValidationError(
            {"partitions": [f"{cluster} has no partition {', '.join(unknown)}"]}
        )
    return list(found.values())


@extend_schema(tags=["pools"])
class PoolViewSet(ApiViewSet):
    """Resource pools: what SU are granted and charged on."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    serializer_class = PoolOutputSerializer
    lookup_value_regex = ID_PATTERN
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[ResourcePool]:
        return (
            ResourcePool.objects.select_related("cluster")
            .prefetch_related("partitions")
            .order_by("name")
        )

    def list(self, request: Request) -> Response:
        """Every pool with its cluster, partitions and policy."""
        return self.paginated(self.get_queryset(), PoolOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(PoolOutputSerializer(self.get_object()).data)

    @extend_schema(request=PoolInputSerializer, responses={201: PoolOutputSerializer})
    def create(self, request: Request) -> Response:
        """Staff: a new pool on a cluster (``pool_create``, as the staff page)."""
        data = PoolInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        cluster = values["cluster"]
        pool = pool_create(
            actor=acting_user(request), cluster=cluster,
            partitions=_partitions(cluster, values.get("partitions", [])),
            settings={name: values[name] for name in POOL_SETTINGS if name in values},
        )  # fmt: skip
        fresh = self.get_queryset().get(pk=pool.pk)
        return Response(PoolOutputSerializer(fresh).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PoolInputSerializer, responses=PoolOutputSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Staff: change a pool's settings or partitions (``pool_update``); its cluster stays,
        and what is left out stays as it is."""
        pool = self.get_object()
        data = PoolInputSerializer(pool, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if "cluster" in values and values["cluster"].pk != pool.cluster_id:
            raise serializers.ValidationError({"cluster": ["a pool's cluster never changes"]})
        partitions = (
            _partitions(pool.cluster, values["partitions"])
            if "partitions" in values
            else list(pool.partitions.all())
        )
        pool_update(
            pool=pool, actor=acting_user(request), partitions=partitions,
            settings={name: values[name] for name in POOL_SETTINGS if name in values},
        )  # fmt: skip
        return Response(PoolOutputSerializer(self.get_queryset().get(pk=pool.pk)).data)
